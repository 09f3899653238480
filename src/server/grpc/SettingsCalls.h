#pragma once
// Triton's logging and trace extensions over gRPC: the unary LogSettings and
// TraceSetting methods, answered at once on the polling thread. The settings
// live in server/common/LogControl.h and server/tracing/TraceSettings.h.
// Internal to src/server/grpc.
#include <grpcpp/support/status.h>

#include "grpc_service.grpc.pb.h"

namespace ortserve::grpcfe {

class GrpcServiceCore;

// Each setting as Triton types it: log_info/log_warning/log_error bool_param,
// log_verbose_level uint32_param, log_format string_param; any log_file is
// UNIMPLEMENTED (it cannot change at run time).
grpc::Status LogSettings(GrpcServiceCore& core, const inference::LogSettingsRequest& request,
                         inference::LogSettingsResponse* response);

// A setting with no value clears it; trace_level takes several values, the
// others exactly one.
grpc::Status TraceSetting(GrpcServiceCore& core, const inference::TraceSettingRequest& request,
                          inference::TraceSettingResponse* response);

}  // namespace ortserve::grpcfe

#pragma once
// Translation between the KServe v2 gRPC messages (grpc_service.proto) and the
// core request/response types. Pure functions: no sockets, no threads, so they
// are unit-tested directly.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "server/common/SharedMemoryParameters.h"
#include "server/common/TensorLimits.h"
#include "grpc_service.pb.h"

namespace ortserve::grpcfe {

// The one place where core status codes become gRPC codes:
//   kInvalidArgument -> INVALID_ARGUMENT
//   kNotFound (unknown model/version) -> NOT_FOUND (as Triton's GrpcStatusUtil)
//   kUnavailable (overload, not ready, shutting down)   -> UNAVAILABLE
//   kUnsupported -> UNIMPLEMENTED, kDeadlineExceeded -> DEADLINE_EXCEEDED,
//   kCancelled -> CANCELLED, kPayloadTooLarge -> RESOURCE_EXHAUSTED,
//   kInternal -> INTERNAL.
grpc::StatusCode ToGrpcCode(StatusCode code);
grpc::Status ToGrpcStatus(const Status& status);

// Fills `out` (model, version, id, inputs, requested outputs, timeout,
// priority and sequence parameters) from `message`. Tensors from
// raw_input_contents and typed contents whose element type matches the wire
// type (INT32, INT64, UINT32, UINT64, FP32, FP64) view the message's memory,
// kept alive by `message`: no copy. Other typed contents (BOOL, INT8/16,
// UINT8/16, BYTES) are converted into a new buffer. Does not set on_complete, cancelled or arrival_time.
// No input may have more than `max_tensor_elements` elements (checked from
// its shape before its contents are read; common::LimitedElementCount).
// The sequence parameters follow Triton's gRPC front end: sequence_id is an
// int64_param (non-negative), a uint64_param or a string_param of at most
// 128 characters; sequence_start and sequence_end are bool_params; a true
// flag needs an id (common::CheckSequenceParameters). Each refusal is
// kInvalidArgument naming the parameter.
// Inputs and outputs that name a shared memory region (shared_memory_*
// parameters) go to *shared_memory: such an input's data is left empty for
// common::BindSharedMemory, and it has no raw_input_contents entry (the
// others keep theirs, in order). Without `shared_memory` they are refused
// (kUnsupported).
Status DecodeInferRequest(std::shared_ptr<const inference::ModelInferRequest> message, InferenceRequest* out,
                          uint64_t max_tensor_elements = common::kDefaultMaxTensorElements,
                          common::SharedMemoryRefs* shared_memory = nullptr);

// Writes every output as name, datatype, shape and one raw_output_contents
// entry, in order. `request_id` is echoed as the response id. An output that
// `in_shared_memory` (parallel to response.outputs) places in a region gets
// its region, offset and byte size as parameters and an empty
// raw_output_contents entry.
using SharedMemoryPlacements = std::vector<std::optional<common::SharedMemoryPlacement>>;
void EncodeInferResponse(const InferenceResponse& response, const std::string& request_id,
                         inference::ModelInferResponse* out,
                         const SharedMemoryPlacements* in_shared_memory = nullptr);

}  // namespace ortserve::grpcfe

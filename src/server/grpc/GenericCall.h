#pragma once
// grpc.health.v1.Health/Check, answered from a call of the generic service
// (InferCall.h's listener reads its request). Internal to src/server/grpc.
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

namespace ortserve::grpcfe {

class GrpcServiceCore;

// The HealthCheckResponse to the HealthCheckRequest `in` (consumed) in `out`,
// or the error: INVALID_ARGUMENT (not a request), NOT_FOUND (another service).
grpc::Status AnswerHealthCheck(const GrpcServiceCore& core, grpc::ByteBuffer* in, grpc::ByteBuffer* out);

}  // namespace ortserve::grpcfe

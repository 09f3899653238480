#include "server/grpc/GenericCall.h"

#include <string>
#include <vector>

#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/support/byte_buffer.h>

#include "server/grpc/GrpcServiceCore.h"

namespace ortserve::grpcfe {

// Served through the generic service so that the answer is computed when asked
// (no status cache to keep in sync) and no health proto needs generating:
// HealthCheckRequest is {string service = 1}, HealthCheckResponse is
// {ServingStatus status = 1} with SERVING = 1, NOT_SERVING = 2.
grpc::Status AnswerHealthCheck(const GrpcServiceCore& core, grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (in->Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed HealthCheckRequest");
  }
  std::string service;
  for (int i = 0; i < fields.field_count(); ++i) {
    const auto& field = fields.field(i);
    if (field.number() == 1 && field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      service = field.length_delimited();
    }
  }
  if (!service.empty() && service != "inference.GRPCInferenceService") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + service + "'");
  }
  const char response[2] = {0x08, static_cast<char>(core.ServerReady() ? 1 : 2)};
  grpc::Slice slice(response, sizeof(response));
  *out = grpc::ByteBuffer(&slice, 1);
  return grpc::Status::OK;
}

}  // namespace ortserve::grpcfe

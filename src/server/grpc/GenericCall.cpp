#include "server/grpc/GenericCall.h"

#include <string>
#include <vector>

#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/support/byte_buffer.h>

#include "server/auth/AccessPolicy.h"
#include "server/grpc/GrpcCalls.h"
#include "server/grpc/GrpcServiceCore.h"

namespace ortserve::grpcfe {
namespace {

// Served through the generic service so that the answer is computed when asked
// (no status cache to keep in sync) and no health proto needs generating:
// HealthCheckRequest is {string service = 1}, HealthCheckResponse is
// {ServingStatus status = 1} with SERVING = 1, NOT_SERVING = 2.
class GenericCall final : public CallBase {
 public:
  static void Listen(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) { new GenericCall(core, cq); }

  void OnEvent(int event, bool ok) override {
    switch (event) {
      case kRequest:
        if (!ok) {
          delete this;
          return;
        }
        Listen(core_, cq_);
        MarkStarted();
        if (ctx_.method() == "/grpc.health.v1.Health/Check") {
          if (grpc::Status denied = core_->CheckAccess(auth::ApiGroup::kHealth, ctx_); !denied.ok()) {
            stream_.Finish(denied, &finish_tag_);
            return;
          }
          stream_.Read(&in_, &read_tag_);
        } else {
          stream_.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "unknown method " + ctx_.method()),
                         &finish_tag_);
        }
        return;
      case kRead:
        AnswerHealthCheck(ok);
        return;
      case kFinish:
        delete this;
        return;
    }
  }

 private:
  enum { kRequest, kRead, kFinish };

  GenericCall(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) : CallBase(core), cq_(cq) {
    core_->generic_service().RequestCall(&ctx_, &stream_, cq_, cq_, &request_tag_);
  }

  void AnswerHealthCheck(bool ok) {
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (ok && in_.Dump(&slices).ok()) {
      for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    google::protobuf::UnknownFieldSet fields;
    if (!ok || !fields.ParseFromString(bytes)) {
      stream_.Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed HealthCheckRequest"),
                     &finish_tag_);
      return;
    }
    std::string service;
    for (int i = 0; i < fields.field_count(); ++i) {
      const auto& field = fields.field(i);
      if (field.number() == 1 && field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
        service = field.length_delimited();
      }
    }
    if (!service.empty() && service != "inference.GRPCInferenceService") {
      stream_.Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + service + "'"),
                     &finish_tag_);
      return;
    }
    const char response[2] = {0x08, static_cast<char>(core_->ServerReady() ? 1 : 2)};
    grpc::Slice slice(response, sizeof(response));
    out_ = grpc::ByteBuffer(&slice, 1);
    stream_.WriteAndFinish(out_, grpc::WriteOptions(), grpc::Status::OK, &finish_tag_);
  }

  grpc::ServerCompletionQueue* const cq_;
  grpc::GenericServerContext ctx_;
  grpc::GenericServerAsyncReaderWriter stream_{&ctx_};
  grpc::ByteBuffer in_;
  grpc::ByteBuffer out_;
  Tag request_tag_{this, kRequest};
  Tag read_tag_{this, kRead};
  Tag finish_tag_{this, kFinish};
};

}  // namespace

void ListenGeneric(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) { GenericCall::Listen(core, cq); }

}  // namespace ortserve::grpcfe

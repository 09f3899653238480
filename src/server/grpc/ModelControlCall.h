#pragma once
// RepositoryModelLoad and RepositoryModelUnload. Internal to src/server/grpc.
#include <optional>

#include <grpcpp/alarm.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/async_unary_call.h>

#include "repository/ModelRepository.h"
#include "server/auth/AccessPolicy.h"
#include "server/grpc/GrpcCalls.h"
#include "server/grpc/GrpcInferCodec.h"
#include "server/grpc/GrpcServiceCore.h"
#include "server/grpc/UnaryCall.h"

namespace ortserve::grpcfe {

// The load or unload runs on the repository's loader thread (it may take
// seconds: sessions, warm-up, draining); its completion only wakes this call's
// queue, and the call is finished on the polling thread. Request parameters
// are accepted and ignored. Lifetime: the request → (wake) → finish chain.
template <typename Req, typename Resp, bool kLoad>
class ModelControlCall final : public CallBase {
 public:
  using RequestFn = typename UnaryCall<Req, Resp>::RequestFn;

  static void Listen(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq, RequestFn request) {
    new ModelControlCall(core, cq, request);
  }

  void OnEvent(int event, bool ok) override {
    switch (event) {
      case kRequest:
        if (!ok) {
          delete this;
          return;
        }
        Listen(core_, cq_, request_fn_);
        Start();
        return;
      case kResult:
        Finish(*result_);
        return;
      case kFinish:
        delete this;
        return;
    }
  }

 private:
  enum { kRequest, kResult, kFinish };

  ModelControlCall(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq, RequestFn request)
      : CallBase(core), cq_(cq), request_fn_(request) {
    (core_->service().*request_fn_)(&ctx_, &request_, &responder_, cq_, cq_, &request_tag_);
  }

  void Start() {
    if (grpc::Status denied = core_->CheckAccess(auth::ApiGroup::kModelRepository, ctx_); !denied.ok()) {
      return responder_.FinishWithError(denied, &finish_tag_);
    }
    if (core_->stopping()) return Finish(Unavailable("server is shutting down"));
    if (core_->ModelControlLocked()) {
      return responder_.FinishWithError(
          grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                       auth::ModelControlNeedsAuthMessage("--grpc-restricted-protocol")),
          &finish_tag_);
    }
    auto done = [this](Status status) {
      result_.emplace(std::move(status));
      WakeQueue(&alarm_, cq_, &result_tag_);
    };
    if constexpr (kLoad) {
      core_->repository().LoadAsync(request_.model_name(), std::move(done));
    } else {
      core_->repository().UnloadAsync(request_.model_name(), std::move(done));
    }
  }

  void Finish(const Status& status) {
    if (status.ok()) {
      responder_.Finish(response_, grpc::Status::OK, &finish_tag_);
    } else {
      responder_.FinishWithError(ToGrpcStatus(status), &finish_tag_);
    }
  }

  grpc::ServerCompletionQueue* const cq_;
  const RequestFn request_fn_;
  grpc::ServerContext ctx_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> responder_{&ctx_};
  std::optional<Status> result_;
  grpc::Alarm alarm_;
  Tag request_tag_{this, kRequest};
  Tag result_tag_{this, kResult};
  Tag finish_tag_{this, kFinish};
};

}  // namespace ortserve::grpcfe

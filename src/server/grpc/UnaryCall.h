#pragma once
// The unary methods answered at once on the polling thread (metadata,
// readiness, config, statistics, index, and the extensions ortserve does not
// implement): one call object per call, re-posting its listener when a call
// arrives. Internal to src/server/grpc.
#include <grpcpp/server_context.h>
#include <grpcpp/support/async_unary_call.h>

#include "grpc_service.grpc.pb.h"
#include "server/auth/AccessPolicy.h"
#include "server/grpc/GrpcCalls.h"
#include "server/grpc/GrpcServiceCore.h"

namespace ortserve::grpcfe {

using Service = AsyncService;

template <typename Req, typename Resp>
class UnaryCall final : public CallBase {
 public:
  using RequestFn = void (Service::*)(grpc::ServerContext*, Req*, grpc::ServerAsyncResponseWriter<Resp>*,
                                      grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);
  using HandleFn = grpc::Status (*)(GrpcServiceCore&, const Req&, Resp*);

  static void Listen(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq, auth::ApiGroup group,
                     RequestFn request, HandleFn handle) {
    new UnaryCall(core, cq, group, request, handle);
  }

  void OnEvent(int event, bool ok) override {
    if (event == kFinish || !ok) {
      delete this;  // finished, or the server shut down before a call came
      return;
    }
    Listen(core_, cq_, group_, request_fn_, handle_fn_);
    MarkStarted();
    grpc::Status status = core_->CheckAccess(group_, ctx_);
    if (status.ok()) status = handle_fn_(*core_, request_, &response_);
    if (status.ok()) {
      responder_.Finish(response_, status, &finish_tag_);
    } else {
      responder_.FinishWithError(status, &finish_tag_);
    }
  }

 private:
  enum { kRequest, kFinish };
  UnaryCall(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq, auth::ApiGroup group, RequestFn request,
            HandleFn handle)
      : CallBase(core), cq_(cq), group_(group), request_fn_(request), handle_fn_(handle) {
    (core_->service().*request_fn_)(&ctx_, &request_, &responder_, cq_, cq_, &request_tag_);
  }

  grpc::ServerCompletionQueue* const cq_;
  const auth::ApiGroup group_;
  const RequestFn request_fn_;
  const HandleFn handle_fn_;
  grpc::ServerContext ctx_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> responder_{&ctx_};
  Tag request_tag_{this, kRequest};
  Tag finish_tag_{this, kFinish};
};

template <typename Req, typename Resp>
void ListenUnary(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq, auth::ApiGroup group,
                 typename UnaryCall<Req, Resp>::RequestFn request,
                 typename UnaryCall<Req, Resp>::HandleFn handle) {
  UnaryCall<Req, Resp>::Listen(core, cq, group, request, handle);
}

}  // namespace ortserve::grpcfe

#include "server/grpc/InferCall.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <grpcpp/alarm.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/async_unary_call.h>

#include "grpc_service.grpc.pb.h"
#include "server/common/InferAdmission.h"
#include "server/grpc/GrpcCalls.h"
#include "server/grpc/GrpcInferCodec.h"
#include "server/grpc/GrpcServiceCore.h"
#include "server/tracing/RequestTracer.h"

namespace ortserve::grpcfe {
namespace {

// Lifetime: a reference count over the things that will still call back into
// the object: the request/infer/finish chain (1) and the done notification (1).
class InferCall final : public CallBase {
 public:
  static void Listen(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) { new InferCall(core, cq); }

  void OnEvent(int event, bool ok) override {
    switch (event) {
      case kRequest:
        if (!ok) {
          delete this;  // never started: the done tag will not come either
          return;
        }
        Listen(core_, cq_);
        MarkStarted();
        refs_.fetch_add(1, std::memory_order_relaxed);  // the done notification
        Start();
        return;
      case kResult:
        Respond();
        return;
      case kFinish:
        Unref();
        return;
      case kDone:
        if (ctx_.IsCancelled()) cancelled_->Cancel();
        Unref();
        return;
    }
  }

 private:
  enum { kRequest, kResult, kFinish, kDone };

  InferCall(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) : CallBase(core), cq_(cq) {
    ctx_.AsyncNotifyWhenDone(&done_tag_);
    core_->service().RequestModelInfer(&ctx_, message_.get(), &responder_, cq_, cq_, &request_tag_);
  }

  void Start() {
    common::InferAdmission& admission = core_->admission();
    std::optional<std::string> traceparent;
    if (admission.tracing()) traceparent = TraceparentOf(ctx_);
    report_ = admission.StartReport(traceparent, message_->model_name());
    if (grpc::Status denied = core_->CheckAccess(auth::ApiGroup::kInference, ctx_); !denied.ok()) {
      return FinishWithError(denied);
    }
    if (Status accepting = admission.CheckAccepting(); !accepting.ok()) return FinishWithError(accepting);
    auto request = std::make_unique<InferenceRequest>();
    common::SharedMemoryRefs regions;
    Status decoded = DecodeInferRequest(message_, request.get(), core_->options().max_tensor_elements, &regions);
    if (!decoded.ok()) return FinishWithError(decoded);
    if (!regions.empty()) {
      auto bound = common::BindSharedMemory(core_->shared_memory(), regions, request.get());
      if (!bound.ok()) return FinishWithError(bound.status());
      shm_outputs_ = std::move(bound).value();
    }
    Status admitted = admission.Admit(std::move(request), cancelled_, report_.trace, [this] {
      return [this](Result<InferenceResponse> result) {
        result_.emplace(std::move(result));
        WakeQueue(&alarm_, cq_, &result_tag_);
      };
    });
    if (!admitted.ok()) return FinishWithError(admitted);
  }

  void Respond() {
    if (!result_->ok()) return FinishWithError(result_->status());
    std::optional<SharedMemoryPlacements> placed;
    if (shm_outputs_) {
      auto written = shm_outputs_->Write(result_->value());
      if (!written.ok()) return FinishWithError(written.status());
      placed = std::move(written).value();
      shm_outputs_.reset();
    }
    EncodeInferResponse(result_->value(), message_->id(), &response_, placed ? &*placed : nullptr);
    if (report_) LogAccess(grpc::StatusCode::OK, &result_->value(), response_.ByteSizeLong());
    result_.reset();
    message_.reset();  // the input tensors viewed it; the model is done with them
    responder_.Finish(response_, grpc::Status::OK, &finish_tag_);
  }

  void FinishWithError(const Status& status) { FinishWithError(ToGrpcStatus(status)); }
  void FinishWithError(const grpc::Status& error) {
    if (report_) LogAccess(error.error_code(), nullptr, error.error_message().size());
    responder_.FinishWithError(error, &finish_tag_);
  }

  void LogAccess(grpc::StatusCode code, const InferenceResponse* response, uint64_t bytes_out) const {
    // The access log line and the trace's spans.
    report_(InferAccessRecord("grpc", message_->id(), message_->model_name(),
                              message_->model_version(), code, response,
                              message_->ByteSizeLong(), bytes_out));
  }

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext ctx_;
  std::shared_ptr<inference::ModelInferRequest> message_ = std::make_shared<inference::ModelInferRequest>();
  inference::ModelInferResponse response_;
  grpc::ServerAsyncResponseWriter<inference::ModelInferResponse> responder_{&ctx_};
  CancelFlag cancelled_ = std::make_shared<CancelToken>();
  std::optional<Result<InferenceResponse>> result_;
  std::shared_ptr<const common::SharedMemoryOutputs> shm_outputs_;  // null: no output goes to a region
  tracing::CompletionReport report_;  // set in Start()
  grpc::Alarm alarm_;
  std::atomic<int> refs_{1};
  Tag request_tag_{this, kRequest};
  Tag result_tag_{this, kResult};
  Tag finish_tag_{this, kFinish};
  Tag done_tag_{this, kDone};
};

}  // namespace

void ListenModelInfer(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) { InferCall::Listen(core, cq); }

}  // namespace ortserve::grpcfe

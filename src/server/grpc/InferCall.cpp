#include "server/grpc/InferCall.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <grpcpp/alarm.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include "core/LogContext.h"
#include "grpc_service.grpc.pb.h"
#include "server/common/InferAdmission.h"
#include "server/grpc/GenericCall.h"
#include "server/grpc/GrpcCalls.h"
#include "server/grpc/GrpcInferCodec.h"
#include "server/grpc/GrpcServiceCore.h"
#include "server/tracing/RequestTracer.h"

namespace ortserve::grpcfe {
namespace {

constexpr std::string_view kModelInferMethod = "/inference.GRPCInferenceService/ModelInfer";
constexpr std::string_view kHealthCheckMethod = "/grpc.health.v1.Health/Check";

// Lifetime: a reference count over the things that will still call back into
// the object: the request/read/infer/finish chain (1) and the done
// notification (1).
class GenericCall final : public CallBase {
 public:
  static void Listen(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) { new GenericCall(core, cq); }

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
        Route();
        return;
      case kRead:
        OnRead(ok);
        return;
      case kResult:
        Respond();
        return;
      case kLoaded:
        load_wait_.Release();
        if (!load_status_.ok()) return FinishWithError(load_status_);
        if (core_->admission().AwaitsAnotherLoad(message_->model_name(), load_waits_)) return AwaitModelLoad();
        Admit();
        return;
      case kRefused:
        Finish(refusal_);
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
  enum { kRequest, kRead, kResult, kFinish, kDone, kLoaded, kRefused };
  enum class Method { kModelInfer, kHealthCheck };

  GenericCall(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) : CallBase(core), cq_(cq) {
    ctx_.AsyncNotifyWhenDone(&done_tag_);
    core_->generic_service().RequestCall(&ctx_, &stream_, cq_, cq_, &request_tag_);
  }

  // The call has its metadata and no message yet: check its credentials
  // before reading any.
  void Route() {
    auth::ApiGroup group = auth::ApiGroup::kHealth;
    if (ctx_.method() == kModelInferMethod) {
      method_ = Method::kModelInfer;
      group = auth::ApiGroup::kInference;
    } else if (ctx_.method() == kHealthCheckMethod) {
      method_ = Method::kHealthCheck;
    } else {
      return Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "unknown method " + ctx_.method()));
    }
    if (grpc::Status denied = core_->CheckAccess(group, ctx_); !denied.ok()) {
      // Refused ModelInfer calls are logged too, without the model they
      // named: their message is never read.
      if (method_ == Method::kModelInfer) report_ = StartReport();
      return FinishWithError(denied);
    }
    stream_.Read(&in_, &read_tag_);
  }

  void OnRead(bool ok) {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::INTERNAL, "the call carried no request message"));
    if (method_ == Method::kHealthCheck) {
      grpc::Status answered = AnswerHealthCheck(*core_, &in_, &out_);
      if (!answered.ok()) return Finish(answered);
      stream_.WriteAndFinish(out_, grpc::WriteOptions(), grpc::Status::OK, &finish_tag_);
      return;
    }
    grpc::Status parsed =
        grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(&in_, message_.get());
    if (!parsed.ok()) return Finish(parsed);
    Start();
  }

  // The access-log line and the trace of this ModelInfer call, for the model
  // its message names (none before the message is read).
  tracing::CompletionReport StartReport() const {
    const common::InferAdmission& admission = core_->admission();
    std::optional<std::string> traceparent;
    if (admission.tracing()) traceparent = TraceparentOf(ctx_);
    return admission.StartReport(traceparent, message_->model_name());
  }

  void Start() {
    common::InferAdmission& admission = core_->admission();
    report_ = StartReport();
    if (Status accepting = admission.CheckAccepting(); !accepting.ok()) return FinishWithError(accepting);
    if (admission.AwaitsAnotherLoad(message_->model_name(), load_waits_)) return AwaitModelLoad();
    Admit();
  }

  // --model-load-on-demand: the call waits off the completion queue's thread
  // for its model's load (bounded by its deadline), counted in flight so that
  // shutdown waits for it, then goes on there (kLoaded).
  void AwaitModelLoad() {
    load_wait_ = common::InFlightHold(core_->admission().in_flight());
    const auto left = ctx_.deadline() - std::chrono::system_clock::now();
    const Clock::time_point deadline =
        left > std::chrono::hours(24 * 365) ? Clock::time_point::max()
                                            : Clock::now() + std::chrono::duration_cast<Clock::duration>(left);
    core_->repository().WhenLoaded(message_->model_name(), deadline, [this](Status loaded) {
      load_status_ = std::move(loaded);
      WakeQueue(&load_alarm_, cq_, &loaded_tag_);
    });
  }

  void Admit() {
    RequestLogScope log_scope = LogScopeOfCall();
    common::InferAdmission& admission = core_->admission();
    std::string client;
    if (admission.quotas()) client = ClientIdOf(ctx_, core_->options().quotas.client_id_header, core_->connections());
    // A ticket taken before a wait for the model's reload is still this call's.
    common::InferAdmission::QuotaCheck quota{
        .client = client, .rejection = {}, .admitted = quota_};
    // Over quota: refused before the request is decoded.
    if (!admission.CheckQuotaEarly(message_->model_name(), message_->model_version(), &quota).ok())
      return RefuseOverQuota(*quota.rejection);
    quota_ = quota.admitted;
    auto request = std::make_unique<InferenceRequest>();
    common::SharedMemoryRefs regions;
    Status decoded = DecodeInferRequest(message_, request.get(), core_->options().max_tensor_elements, &regions);
    if (!decoded.ok()) return FinishWithError(decoded);
    if (!regions.empty()) {
      auto bound = common::BindSharedMemory(core_->shared_memory(), regions, request.get());
      if (!bound.ok()) return FinishWithError(bound.status());
      shm_outputs_ = std::move(bound).value();
    }
    Status admitted = admission.Admit(
        std::move(request), cancelled_, report_.trace,
        [this] {
          return [this](Result<InferenceResponse> result) {
            result_.emplace(std::move(result));
            WakeQueue(&alarm_, cq_, &result_tag_);
          };
        },
        admission.quotas() ? &quota : nullptr);
    if (quota.rejection) return RefuseOverQuota(*quota.rejection);
    if (!admitted.ok()) {
      // Evicted (memory budget) after Start looked: wait for its reload; the message is still here.
      if (admission.AwaitsAnotherLoad(message_->model_name(), load_waits_)) return AwaitModelLoad();
      return FinishWithError(admitted);
    }
  }

  void Respond() {
    RequestLogScope log_scope = LogScopeOfCall();
    if (!result_->ok()) return FinishWithError(result_->status());
    std::optional<SharedMemoryPlacements> placed;
    if (shm_outputs_) {
      auto written = shm_outputs_->Write(result_->value());
      if (!written.ok()) return FinishWithError(written.status());
      placed = std::move(written).value();
      shm_outputs_.reset();
    }
    inference::ModelInferResponse response;
    EncodeInferResponse(result_->value(), message_->id(), &response, placed ? &*placed : nullptr);
    if (report_) LogAccess(grpc::StatusCode::OK, &result_->value(), response.ByteSizeLong());
    result_.reset();
    message_.reset();  // the input tensors viewed it; the model is done with them
    bool own_buffer = false;
    grpc::Status serialized =
        grpc::SerializationTraits<inference::ModelInferResponse>::Serialize(response, &out_, &own_buffer);
    if (!serialized.ok()) return Finish(serialized);
    stream_.WriteAndFinish(out_, grpc::WriteOptions(), grpc::Status::OK, &finish_tag_);
  }

  // Lines logged on this thread while the call's request is handled carry
  // it (core/LogContext.h).
  RequestLogScope LogScopeOfCall() const {
    return RequestLogScope(message_->model_name(), message_->model_version(), message_->id(), report_.trace.get());
  }

  // RESOURCE_EXHAUSTED, logged now and sent once the rejection's pause has
  // passed (QuotaRejection::pause): a closed-loop client that ignores it is
  // paced as over HTTP. The message's tensors are dropped meanwhile.
  void RefuseOverQuota(const common::QuotaRejection& rejection) {
    refusal_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, rejection.message);
    if (report_) LogAccess(refusal_.error_code(), nullptr, refusal_.error_message().size());
    message_->clear_inputs();
    message_->clear_raw_input_contents();
    const auto at = std::chrono::system_clock::now() + rejection.pause;
    alarm_.Set(cq_, at, &refused_tag_);
  }

  void FinishWithError(const Status& status) { FinishWithError(ToGrpcStatus(status)); }
  void FinishWithError(const grpc::Status& error) {
    if (report_) LogAccess(error.error_code(), nullptr, error.error_message().size());
    Finish(error);
  }
  void Finish(const grpc::Status& status) { stream_.Finish(status, &finish_tag_); }

  void LogAccess(grpc::StatusCode code, const InferenceResponse* response, uint64_t bytes_out) const {
    // The access log line and the trace's spans.
    report_(InferAccessRecord("grpc", message_->id(), message_->model_name(), message_->model_version(), code,
                              response, message_->ByteSizeLong(), bytes_out));
  }

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  grpc::ServerCompletionQueue* const cq_;
  grpc::GenericServerContext ctx_;
  grpc::GenericServerAsyncReaderWriter stream_{&ctx_};
  Method method_ = Method::kHealthCheck;
  grpc::ByteBuffer in_;
  grpc::ByteBuffer out_;
  std::shared_ptr<inference::ModelInferRequest> message_ = std::make_shared<inference::ModelInferRequest>();
  CancelFlag cancelled_ = std::make_shared<CancelToken>();
  std::optional<Result<InferenceResponse>> result_;
  std::shared_ptr<const common::SharedMemoryOutputs> shm_outputs_;  // null: no output goes to a region
  tracing::CompletionReport report_;  // ModelInfer: set in Start(), or when refused in Route()
  grpc::Alarm alarm_;
  std::atomic<int> refs_{1};
  Tag request_tag_{this, kRequest};
  Tag read_tag_{this, kRead};
  Tag result_tag_{this, kResult};
  Tag finish_tag_{this, kFinish};
  Tag done_tag_{this, kDone};
  Tag loaded_tag_{this, kLoaded};
  Tag refused_tag_{this, kRefused};
  grpc::Status refusal_;  // RefuseOverQuota's, sent at kRefused
  Status load_status_;  // the on-demand load's outcome (kLoaded)
  int load_waits_ = 0;  // loads this call waited for (InferAdmission::AwaitsAnotherLoad)
  common::InFlightHold load_wait_;  // from AwaitModelLoad to kLoaded
  common::InferAdmission::QuotaAdmission quota_;  // once CheckQuotaEarly admitted it
  grpc::Alarm load_alarm_;  // its own: alarm_ wakes the queue for the result
};

}  // namespace

void ListenGeneric(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) { GenericCall::Listen(core, cq); }

}  // namespace ortserve::grpcfe

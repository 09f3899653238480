#include "server/grpc/GrpcCalls.h"

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/alarm.h>
#include <grpcpp/support/byte_buffer.h>
#include <spdlog/spdlog.h>

#include "repository/ModelRepository.h"
#include "server/grpc/GrpcInferCodec.h"
#include "server/grpc/GrpcServiceCore.h"
#include "server/tracing/RequestTracer.h"

namespace ortserve::grpcfe {

using Service = inference::GRPCInferenceService::AsyncService;

CallBase::CallBase(GrpcServiceCore* core) : core_(core) { core_->CallCreated(); }
CallBase::~CallBase() {
  if (started_) core_->CallEnded();
  core_->CallDestroyed();
}

void CallBase::MarkStarted() {
  if (started_) return;
  started_ = true;
  core_->CallStarted();
}

void PollQueue(grpc::ServerCompletionQueue* cq) {
  void* raw = nullptr;
  bool ok = false;
  while (cq->Next(&raw, &ok)) {
    Tag* tag = static_cast<Tag*>(raw);
    tag->call->OnEvent(tag->event, ok);
  }
}

namespace {

// Wakes `cq` with `tag` from any thread: an alarm whose deadline has passed.
void WakeQueue(grpc::Alarm* alarm, grpc::ServerCompletionQueue* cq, Tag* tag) {
  alarm->Set(cq, gpr_time_0(GPR_CLOCK_MONOTONIC), tag);
}

// The W3C traceparent a call carries (repeated metadata joined with ','), or
// nullopt.
std::optional<std::string> TraceparentOf(const grpc::ServerContext& ctx) {
  std::optional<std::string> traceparent;
  for (auto [it, end] = ctx.client_metadata().equal_range("traceparent"); it != end; ++it) {
    AddTraceparentValue(&traceparent, std::string_view(it->second.data(), it->second.size()));
  }
  return traceparent;
}

// The access-log record of one answered infer request: a ModelInfer call
// ("grpc") or one ModelStreamInfer response ("grpc-stream"). `response` is
// null when the request failed.
AccessLogRecord InferAccessRecord(std::string_view protocol, std::string_view request_id,
                                  std::string_view model, std::string_view version,
                                  grpc::StatusCode code, const InferenceResponse* response,
                                  uint64_t bytes_in, uint64_t bytes_out) {
  AccessLogRecord record;
  record.protocol = protocol;
  record.request_id = request_id;
  record.model = model;
  record.version = version;
  record.status_code = static_cast<int>(code);
  record.bytes_in = bytes_in;
  record.bytes_out = bytes_out;
  if (response) record.SetResponse(*response);
  return record;
}

// ---- unary methods answered at once on the polling thread --------------------

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

// ---- ModelInfer ------------------------------------------------------------------

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
    report_ = admission.StartReport(traceparent);
    if (grpc::Status denied = core_->CheckAccess(auth::ApiGroup::kInference, ctx_); !denied.ok()) {
      return FinishWithError(denied);
    }
    if (Status accepting = admission.CheckAccepting(); !accepting.ok()) return FinishWithError(accepting);
    auto request = std::make_unique<InferenceRequest>();
    Status decoded = DecodeInferRequest(message_, request.get(), core_->options().max_tensor_elements);
    if (!decoded.ok()) return FinishWithError(decoded);
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
    EncodeInferResponse(result_->value(), message_->id(), &response_);
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
  tracing::CompletionReport report_;  // set in Start()
  grpc::Alarm alarm_;
  std::atomic<int> refs_{1};
  Tag request_tag_{this, kRequest};
  Tag result_tag_{this, kResult};
  Tag finish_tag_{this, kFinish};
  Tag done_tag_{this, kDone};
};

// ---- ModelStreamInfer --------------------------------------------------------------

// Many requests on one bidirectional stream, each answered by its own response
// (or error_message, which does not end the stream) in completion order.
// One Read and at most one Write are outstanding; finished responses wait in
// `pending_`. The stream is finished (OK) once the client has half-closed, every
// request is answered and every response written. A broken stream (client
// cancel, connection loss) sets the shared cancel flag of its in-flight
// requests and drops their responses.
//
// Lifetime: a reference count over the read loop (1), the done notification
// (1), each request in flight (1), the write loop while active (1) and the
// final Finish (1).
class StreamCall final : public CallBase {
 public:
  static void Listen(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) { new StreamCall(core, cq); }

  void OnEvent(int event, bool ok) override {
    switch (event) {
      case kRequest:
        if (!ok) {
          delete this;
          return;
        }
        Listen(core_, cq_);
        MarkStarted();
        // Every request on the stream continues the stream's trace context.
        if (core_->admission().tracing()) traceparent_ = TraceparentOf(ctx_);
        refs_.fetch_add(1, std::memory_order_relaxed);  // the done notification
        if (grpc::Status denied = core_->CheckAccess(auth::ApiGroup::kInference, ctx_); !denied.ok()) {
          // The read loop's reference passes to this Finish.
          {
            std::lock_guard lock(mu_);
            reads_done_ = true;
            finish_started_ = true;
          }
          stream_.Finish(denied, &finish_tag_);
          return;
        }
        StartRead();
        return;
      case kRead:
        OnRead(ok);
        return;
      case kWake:
      case kWrite:
        OnWritable(event == kWrite && !ok);
        return;
      case kFinish:
        Unref();
        return;
      case kDone:
        if (ctx_.IsCancelled()) {
          cancelled_->Cancel();
          std::lock_guard lock(mu_);
          broken_ = true;
          pending_.clear();
        }
        Unref();
        return;
    }
  }

 private:
  enum { kRequest, kRead, kWake, kWrite, kFinish, kDone };

  struct Answer {
    std::string id;
    std::string model_name;
    std::string model_version;
    Result<InferenceResponse> result;
    uint64_t bytes_in = 0;  // the request message's size; set only when reported
    tracing::CompletionReport report;  // access log line and spans, once written
  };

  StreamCall(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) : CallBase(core), cq_(cq) {
    ctx_.AsyncNotifyWhenDone(&done_tag_);
    core_->service().RequestModelStreamInfer(&ctx_, &stream_, cq_, cq_, &request_tag_);
  }

  void StartRead() {
    reading_ = std::make_shared<inference::ModelInferRequest>();
    stream_.Read(reading_.get(), &read_tag_);
  }

  void OnRead(bool ok) {
    if (!ok) {  // half-close by the client, or a broken stream
      {
        std::lock_guard lock(mu_);
        reads_done_ = true;
        MaybeFinishLocked();
      }
      Unref();
      return;
    }
    std::shared_ptr<inference::ModelInferRequest> message = std::move(reading_);
    {
      std::lock_guard lock(mu_);
      ++in_flight_;
    }
    refs_.fetch_add(1, std::memory_order_relaxed);  // the request in flight
    StartRead();
    Dispatch(std::move(message));
  }

  void Dispatch(std::shared_ptr<inference::ModelInferRequest> message) {
    common::InferAdmission& admission = core_->admission();
    Answer answer{message->id(), message->model_name(), message->model_version(),
                  Status(StatusCode::kInternal, "unanswered"), 0, {}};
    answer.report = admission.StartReport(traceparent_);
    if (answer.report) answer.bytes_in = message->ByteSizeLong();
    auto fail = [&](Status status) {
      answer.result = std::move(status);
      Complete(std::move(answer));
    };
    if (Status accepting = admission.CheckAccepting(); !accepting.ok()) return fail(std::move(accepting));
    auto request = std::make_unique<InferenceRequest>();
    Status decoded = DecodeInferRequest(message, request.get(), core_->options().max_tensor_elements);
    if (!decoded.ok()) return fail(decoded);
    std::shared_ptr<RequestTrace> trace = answer.report.trace;
    Status admitted = admission.Admit(std::move(request), cancelled_, std::move(trace), [&] {
      // `answer` moves into the callback: only a failed lookup, which never
      // calls this, still needs it.
      return [this, answer = std::move(answer)](Result<InferenceResponse> result) mutable {
        answer.result = std::move(result);
        Complete(std::move(answer));
      };
    });
    if (!admitted.ok()) return fail(admitted);
  }

  // Any thread: queue the answer and make sure the write loop runs.
  void Complete(Answer answer) {
    {
      std::lock_guard lock(mu_);
      --in_flight_;
      if (!broken_) {
        pending_.push_back(std::move(answer));
        if (!writing_) {
          writing_ = true;  // this request's reference passes to the write loop
          WakeQueue(&alarm_, cq_, &wake_tag_);
          return;
        }
      } else {
        MaybeFinishLocked();
      }
    }
    Unref();
  }

  // Polling thread: the write loop. Writes the next pending answer, or stops.
  void OnWritable(bool write_failed) {
    std::optional<Answer> next;
    {
      std::lock_guard lock(mu_);
      if (write_failed) {
        broken_ = true;
        pending_.clear();
      }
      if (!broken_ && !pending_.empty()) {
        next.emplace(std::move(pending_.front()));
        pending_.pop_front();
      } else {
        writing_ = false;
        MaybeFinishLocked();
      }
    }
    if (!next) {
      Unref();
      return;
    }
    Encode(*next, &out_);
    if (next->report) LogAccess(*next, out_.ByteSizeLong());
    stream_.Write(out_, &write_tag_);
  }

  // One access-log line (and a traced request's spans) per response
  // written, as for a unary call. Answers dropped because the stream broke
  // are never written, so not reported.
  void LogAccess(const Answer& answer, uint64_t bytes_out) const {
    const InferenceResponse* response = answer.result.ok() ? &answer.result.value() : nullptr;
    const grpc::StatusCode code =
        response ? grpc::StatusCode::OK : ToGrpcCode(answer.result.status().code());
    answer.report(InferAccessRecord("grpc-stream", answer.id, answer.model_name,
                                    answer.model_version, code, response, answer.bytes_in,
                                    bytes_out));
  }

  static void Encode(const Answer& answer, inference::ModelStreamInferResponse* out) {
    out->Clear();
    if (answer.result.ok()) {
      EncodeInferResponse(answer.result.value(), answer.id, out->mutable_infer_response());
      return;
    }
    out->set_error_message(answer.result.status().message());
    // Not read by Triton's clients, but lets a client match errors to requests.
    auto* response = out->mutable_infer_response();
    response->set_id(answer.id);
    response->set_model_name(answer.model_name);
    response->set_model_version(answer.model_version);
  }

  void MaybeFinishLocked() {
    if (reads_done_ && in_flight_ == 0 && !writing_ && !finish_started_) {
      finish_started_ = true;
      refs_.fetch_add(1, std::memory_order_relaxed);
      stream_.Finish(grpc::Status::OK, &finish_tag_);
    }
  }

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest> stream_{&ctx_};
  std::optional<std::string> traceparent_;  // the stream's; read when it starts
  std::shared_ptr<inference::ModelInferRequest> reading_;  // polling thread only
  inference::ModelStreamInferResponse out_;                // the write loop only
  CancelFlag cancelled_ = std::make_shared<CancelToken>();
  grpc::Alarm alarm_;
  std::atomic<int> refs_{1};

  std::mutex mu_;
  std::deque<Answer> pending_;   // guarded by mu_
  int in_flight_ = 0;            // guarded by mu_
  bool writing_ = false;         // guarded by mu_: a wake or Write is outstanding
  bool reads_done_ = false;      // guarded by mu_
  bool broken_ = false;          // guarded by mu_
  bool finish_started_ = false;  // guarded by mu_

  Tag request_tag_{this, kRequest};
  Tag read_tag_{this, kRead};
  Tag wake_tag_{this, kWake};
  Tag write_tag_{this, kWrite};
  Tag finish_tag_{this, kFinish};
  Tag done_tag_{this, kDone};
};

// ---- grpc.health.v1.Health/Check, and every method nobody registered ----------------

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

// ---- RepositoryModelLoad / RepositoryModelUnload ---------------------------------------

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

// ---- methods of extensions not implemented yet ---------------------------------------

template <typename Req, typename Resp>
grpc::Status NotImplemented(GrpcServiceCore&, const Req&, Resp*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      std::string(Req::descriptor()->name()) + ": this extension is not implemented by ortserve");
}

#define ORTSERVE_HANDLER(method)                                                                      \
  [](GrpcServiceCore& core, const inference::method##Request& request,                                \
     inference::method##Response* response) { return core.method(request, response); }
#define ORTSERVE_LISTEN(method, group, handler)                                                    \
  ListenUnary<inference::method##Request, inference::method##Response>(core, cq, auth::ApiGroup::group, \
                                                                       &Service::Request##method, handler)
#define ORTSERVE_LISTEN_UNIMPLEMENTED(method, group) \
  ORTSERVE_LISTEN(method, group, (&NotImplemented<inference::method##Request, inference::method##Response>))

}  // namespace

void StartListening(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) {
  // API groups as Triton's --grpc-restricted-protocol maps them.
  ORTSERVE_LISTEN(ServerLive, kHealth, ORTSERVE_HANDLER(ServerLive));
  ORTSERVE_LISTEN(ServerReady, kHealth, ORTSERVE_HANDLER(ServerReady));
  ORTSERVE_LISTEN(ModelReady, kHealth, ORTSERVE_HANDLER(ModelReady));
  ORTSERVE_LISTEN(ServerMetadata, kMetadata, ORTSERVE_HANDLER(ServerMetadata));
  ORTSERVE_LISTEN(ModelMetadata, kMetadata, ORTSERVE_HANDLER(ModelMetadata));
  ORTSERVE_LISTEN(ModelConfig, kModelConfig, ORTSERVE_HANDLER(ModelConfig));
  ORTSERVE_LISTEN(ModelStatistics, kStatistics, ORTSERVE_HANDLER(ModelStatistics));
  ORTSERVE_LISTEN(RepositoryIndex, kModelRepository, ORTSERVE_HANDLER(RepositoryIndex));
  ModelControlCall<inference::RepositoryModelLoadRequest, inference::RepositoryModelLoadResponse,
                   true>::Listen(core, cq, &Service::RequestRepositoryModelLoad);
  ModelControlCall<inference::RepositoryModelUnloadRequest, inference::RepositoryModelUnloadResponse,
                   false>::Listen(core, cq, &Service::RequestRepositoryModelUnload);
  ORTSERVE_LISTEN_UNIMPLEMENTED(SystemSharedMemoryStatus, kSharedMemory);
  ORTSERVE_LISTEN_UNIMPLEMENTED(SystemSharedMemoryRegister, kSharedMemory);
  ORTSERVE_LISTEN_UNIMPLEMENTED(SystemSharedMemoryUnregister, kSharedMemory);
  ORTSERVE_LISTEN_UNIMPLEMENTED(CudaSharedMemoryStatus, kSharedMemory);
  ORTSERVE_LISTEN_UNIMPLEMENTED(CudaSharedMemoryRegister, kSharedMemory);
  ORTSERVE_LISTEN_UNIMPLEMENTED(CudaSharedMemoryUnregister, kSharedMemory);
  ORTSERVE_LISTEN_UNIMPLEMENTED(TraceSetting, kTrace);
  ORTSERVE_LISTEN_UNIMPLEMENTED(LogSettings, kLogging);
  // Two pending ModelInfer listeners per queue, so that a burst of calls finds
  // one posted while the previous is being re-posted.
  InferCall::Listen(core, cq);
  InferCall::Listen(core, cq);
  StreamCall::Listen(core, cq);
  GenericCall::Listen(core, cq);
}

}  // namespace ortserve::grpcfe

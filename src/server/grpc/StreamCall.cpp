#include "server/grpc/StreamCall.h"

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <grpcpp/alarm.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/async_stream.h>

#include "core/LogContext.h"
#include "grpc_service.grpc.pb.h"
#include "server/common/InferAdmission.h"
#include "server/grpc/GrpcCalls.h"
#include "server/grpc/GrpcInferCodec.h"
#include "server/grpc/GrpcServiceCore.h"
#include "server/tracing/RequestTracer.h"

namespace ortserve::grpcfe {
namespace {

constexpr size_t kMaxHeldAnswers = 64;
constexpr size_t kMaxPendingBytes = size_t{32} << 20;

size_t OutputBytes(const Result<InferenceResponse>& result) {
  if (!result.ok()) return result.status().message().size();
  size_t bytes = 0;
  for (const Tensor& output : result.value().outputs) bytes += output.data.size();
  return bytes;
}

// Many requests on one bidirectional stream, each answered by its own response
// (or error_message, which does not end the stream) in completion order.
// At most one Read and one Write are outstanding; finished responses wait in
// `pending_`. Back-pressure: the stream stops reading while it holds
// kMaxHeldAnswers requests read and not yet written (in flight or pending) or
// kMaxPendingBytes of pending output, and reads again as the write loop takes
// answers; a client that sends requests and never reads their answers then
// meets HTTP/2 flow control instead of growing the server (gRPC completes a
// Write only once the client's window takes it). The stream is finished (OK)
// once the client has half-closed, every request is answered and every
// response written. A broken stream (client cancel, connection loss) sets the
// shared cancel flag of its in-flight requests and drops their responses.
// With --model-load-on-demand a request whose model is not loaded waits for
// its load (AwaitModelLoad), in flight, while the others go on.
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
        if (core_->admission().quotas()) {
          client_id_ = ClientIdOf(ctx_, core_->options().quotas.client_id_header, core_->connections());
        }
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
        OnDone();
        return;
      case kLoaded:
        OnLoaded();
        return;
    }
  }

 private:
  enum { kRequest, kRead, kWake, kWrite, kFinish, kDone, kLoaded };

  // A request waiting for its model's on-demand load, and then its outcome.
  using QuotaAdmission = common::InferAdmission::QuotaAdmission;

  struct LoadWait {
    std::shared_ptr<inference::ModelInferRequest> message;
    int load_waits = 0;  // InferAdmission::AwaitsAnotherLoad
    Status loaded;
    common::InFlightHold in_flight;  // released when OnLoaded dispatches it again
    QuotaAdmission quota;
  };

  struct Answer {
    std::string id;
    std::string model_name;
    std::string model_version;
    Result<InferenceResponse> result;
    uint64_t bytes_in = 0;  // the request message's size; set only when reported
    size_t bytes = 0;       // its outputs' (or error's) bytes while pending
    std::shared_ptr<const common::SharedMemoryOutputs> shm_outputs{};  // null: no output goes to a region
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
    bool read_on = false;
    {
      std::lock_guard lock(mu_);
      ++in_flight_;
      read_on = MayReadLocked();
      read_paused_ = !read_on;  // the read loop's reference waits with it
    }
    refs_.fetch_add(1, std::memory_order_relaxed);  // the request in flight
    if (read_on) StartRead();
    Dispatch(std::move(message));
  }

  bool MayReadLocked() const {
    return in_flight_ + pending_.size() < kMaxHeldAnswers && pending_bytes_ < kMaxPendingBytes;
  }

  // The call is over (finished, cancelled or broken). A read loop paused by
  // back-pressure will not be resumed by a write: it ends here.
  void OnDone() {
    if (ctx_.IsCancelled()) cancelled_->Cancel();
    bool end_read_loop = false;
    {
      std::lock_guard lock(mu_);
      if (ctx_.IsCancelled()) {
        broken_ = true;
        pending_.clear();
        pending_bytes_ = 0;
      }
      if (read_paused_) {
        read_paused_ = false;
        reads_done_ = true;
        end_read_loop = true;
        MaybeFinishLocked();
      }
    }
    if (end_read_loop) Unref();
    Unref();
  }

  // --model-load-on-demand: the request waits for its model's load off the
  // polling thread, as a unary call does, while the stream reads and answers
  // its other requests; it stays in flight (in_flight_, its reference, and
  // the admission's count, so that shutdown waits for it) until OnLoaded
  // dispatches it again on the polling thread.
  void AwaitModelLoad(std::shared_ptr<inference::ModelInferRequest> message, int load_waits,
                      QuotaAdmission quota = {}) {
    common::InFlightHold in_flight(core_->admission().in_flight());
    const std::string model = message->model_name();
    auto wait = std::make_shared<LoadWait>(
        LoadWait{std::move(message), load_waits, Status::Ok(), std::move(in_flight), std::move(quota)});
    core_->repository().WhenLoaded(model, Clock::time_point::max(), [this, wait](Status loaded) {
      wait->loaded = std::move(loaded);
      std::lock_guard lock(mu_);
      loaded_.push_back(std::move(wait));
      if (!waking_loaded_) {
        waking_loaded_ = true;
        WakeQueue(&load_alarm_, cq_, &loaded_tag_);
      }
    });
  }

  void OnLoaded() {
    std::deque<std::shared_ptr<LoadWait>> loaded;
    {
      std::lock_guard lock(mu_);
      loaded.swap(loaded_);
      waking_loaded_ = false;
    }
    for (auto& wait : loaded) {
      wait->in_flight.Release();
      Dispatch(std::move(wait->message), wait->load_waits, std::move(wait->loaded), std::move(wait->quota));
    }
  }

  // `load_waits`: the loads this request waited for; `loaded`: how the last
  // one ended.
  void Dispatch(std::shared_ptr<inference::ModelInferRequest> message, int load_waits = 0,
                Status loaded = Status::Ok(), QuotaAdmission admitted_by_quota = {}) {
    common::InferAdmission& admission = core_->admission();
    if (loaded.ok() && admission.AwaitsAnotherLoad(message->model_name(), load_waits)) {
      return AwaitModelLoad(std::move(message), load_waits, std::move(admitted_by_quota));
    }
    Answer answer{message->id(), message->model_name(), message->model_version(),
                  Status(StatusCode::kInternal, "unanswered"), 0, 0, {}, {}};
    answer.report = admission.StartReport(traceparent_, message->model_name());
    // Lines logged on this thread while the request is handled carry it.
    RequestLogScope log_scope(message->model_name(), message->model_version(), message->id(),
                              answer.report.trace.get());
    if (answer.report) answer.bytes_in = message->ByteSizeLong();
    auto fail = [&](Status status) {
      answer.result = std::move(status);
      Complete(std::move(answer));
    };
    if (!loaded.ok()) return fail(std::move(loaded));
    if (Status accepting = admission.CheckAccepting(); !accepting.ok()) return fail(std::move(accepting));
    // A quota refusal is answered in-band like every stream error (Triton's
    // streams carry errors as messages, not as the call's status), before
    // the request is decoded.
    common::InferAdmission::QuotaCheck quota{.client = client_id_, .rejection = {},
                                             .admitted = std::move(admitted_by_quota)};
    if (Status within = admission.CheckQuotaEarly(message->model_name(), message->model_version(), &quota);
        !within.ok())
      return fail(std::move(within));
    auto request = std::make_unique<InferenceRequest>();
    common::SharedMemoryRefs regions;
    Status decoded = DecodeInferRequest(message, request.get(), core_->options().max_tensor_elements, &regions);
    if (!decoded.ok()) return fail(decoded);
    if (!regions.empty()) {
      auto bound = common::BindSharedMemory(core_->shared_memory(), regions, request.get());
      if (!bound.ok()) return fail(bound.status());
      answer.shm_outputs = std::move(bound).value();
    }
    std::shared_ptr<RequestTrace> trace = answer.report.trace;
    Status admitted = admission.Admit(
        std::move(request), cancelled_, std::move(trace),
        [&] {
          // `answer` moves into the callback: only a failed lookup, which
          // never calls this, still needs it.
          return [this, answer = std::move(answer)](Result<InferenceResponse> result) mutable {
            answer.result = std::move(result);
            Complete(std::move(answer));
          };
        },
        admission.quotas() ? &quota : nullptr);
    if (!admitted.ok()) {
      // Evicted (memory budget) since it looked: wait for the next load (the
      // answer begun here is dropped unreported; the next Dispatch reports).
      if (admission.AwaitsAnotherLoad(message->model_name(), load_waits)) {
        return AwaitModelLoad(std::move(message), load_waits, std::move(quota.admitted));
      }
      return fail(admitted);
    }
  }

  // Any thread: queue the answer and make sure the write loop runs.
  void Complete(Answer answer) {
    {
      std::lock_guard lock(mu_);
      --in_flight_;
      if (!broken_) {
        answer.bytes = OutputBytes(answer.result);
        pending_bytes_ += answer.bytes;
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
    bool resume_reading = false;
    {
      std::lock_guard lock(mu_);
      if (write_failed) {
        broken_ = true;
        pending_.clear();
        pending_bytes_ = 0;
      }
      if (!broken_ && !pending_.empty()) {
        next.emplace(std::move(pending_.front()));
        pending_.pop_front();
        pending_bytes_ -= next->bytes;
        if (read_paused_ && MayReadLocked()) {
          read_paused_ = false;
          resume_reading = true;
        }
      } else {
        writing_ = false;
        MaybeFinishLocked();
      }
    }
    if (!next) {
      Unref();
      return;
    }
    if (resume_reading) StartRead();
    RequestLogScope log_scope(next->model_name, next->model_version, next->id, next->report.trace.get());
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

  static void Encode(Answer& answer, inference::ModelStreamInferResponse* out) {
    out->Clear();
    if (answer.result.ok() && answer.shm_outputs) {
      auto written = answer.shm_outputs->Write(answer.result.value());
      answer.shm_outputs.reset();
      if (written.ok()) {
        EncodeInferResponse(answer.result.value(), answer.id, out->mutable_infer_response(), &written.value());
        return;
      }
      answer.result = written.status();
    }
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
  std::string client_id_;                   // the quota client id; read when it starts
  // The read loop's: one Read at a time, started on the polling thread.
  std::shared_ptr<inference::ModelInferRequest> reading_;
  inference::ModelStreamInferResponse out_;                // the write loop only
  CancelFlag cancelled_ = std::make_shared<CancelToken>();
  grpc::Alarm alarm_;
  grpc::Alarm load_alarm_;  // wakes the polling thread for loaded_
  std::atomic<int> refs_{1};

  std::mutex mu_;
  std::deque<Answer> pending_;   // guarded by mu_
  size_t pending_bytes_ = 0;     // guarded by mu_: the sum of pending_'s `bytes`
  bool read_paused_ = false;     // guarded by mu_: back-pressure holds the read loop
  int in_flight_ = 0;            // guarded by mu_
  bool writing_ = false;         // guarded by mu_: a wake or Write is outstanding
  bool reads_done_ = false;      // guarded by mu_
  bool broken_ = false;          // guarded by mu_
  bool finish_started_ = false;  // guarded by mu_
  std::deque<std::shared_ptr<LoadWait>> loaded_;  // guarded by mu_: loads ended, for OnLoaded
  bool waking_loaded_ = false;                    // guarded by mu_: load_alarm_ is set

  Tag request_tag_{this, kRequest};
  Tag read_tag_{this, kRead};
  Tag wake_tag_{this, kWake};
  Tag write_tag_{this, kWrite};
  Tag finish_tag_{this, kFinish};
  Tag done_tag_{this, kDone};
  Tag loaded_tag_{this, kLoaded};
};

}  // namespace

void ListenModelStreamInfer(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) { StreamCall::Listen(core, cq); }

}  // namespace ortserve::grpcfe

#pragma once
// The admission step of an infer request, shared by the HTTP and gRPC front
// ends. A front end decodes the wire format and hands the answer back to its
// own thread; everything between is here:
//
//   StartReport(traceparent, model)  at arrival: the request's access-log line and,
//                             if the tracer samples it, its trace
//   CheckAccepting()          kUnavailable once StopAccepting() was called
//   AwaitsAnotherLoad(model, waits)
//                             --model-load-on-demand: whether the request
//                             waits for its model's load (ModelRepository::
//                             WhenLoaded) first, or again once Admit found
//                             the model evicted since
//   ...                       the front end decodes the request (model name
//                             and version included) and answers any error
//                             itself, with the report
//   Admit(request, cancelled, trace, make_done)
//                             finds the model, checks the client's quota,
//                             attaches the client's cancel flag and the
//                             trace, counts the request in flight and hands
//                             it to Model::Infer
//
// Admit's contract:
//   - When the repository has no such ready model, Admit returns its status
//     (kNotFound, kUnavailable), drops the request and never calls
//     make_done: the front end answers the error as it answers a decode
//     error.
//   - When quotas are on and `quota` names the client, a request over its
//     client's quota (ClientQuotas.h) is refused the same way, with
//     quota->rejection set: the front end answers HTTP 429 with Retry-After
//     or gRPC RESOURCE_EXHAUSTED. The check comes after the model lookup, so
//     an unknown model is answered as such and never counted as a rejection.
//   - Otherwise it returns OK, having called make_done() once to get `done`,
//     a callable taking Result<InferenceResponse>. `done` is called exactly
//     once, on whichever thread finishes the request: a scheduler worker, or
//     the caller's own thread inside Admit when the model refuses the request
//     at once. `done` must only hand the result to the front end's thread
//     (post it, wake a completion queue); it must not block.
//   - The request counts in flight from just before Model::Infer until `done`
//     has returned, so when the in-flight count reaches zero every answer is
//     in the front end's hands (what shutdown waits for).
//   - `done` is stored in the request's on_complete together with a pointer
//     to the counter, in one std::function and nothing else: a `done` of one
//     pointer still fits std::function's inline storage, so admitting costs
//     no allocation of its own (with quotas on, the quota ticket costs one).
//     The ticket's in-flight slots are released right after `done` returns.
//   - The model handle is released when Admit returns. A model keeps what a
//     request needs while it runs (the repository shuts a model's scheduler
//     down, answering its requests, before it lets the model go), so a front
//     end need not hold it.
//
// Lifetime: on_complete still touches the counter after `done` returns, so
// the admission must outlive every on_complete it wired. The gRPC front end
// waits for the count to reach zero before its admission goes; the HTTP one,
// whose completions may arrive after its server is gone, keeps the admission
// in a shared_ptr that `done` holds a copy of.
//
// Thread-safe, except set_access_log (before serving).
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/AccessLogRecord.h"
#include "core/InferenceRequest.h"
#include "core/LogContext.h"
#include "core/Status.h"
#include "repository/ModelRepository.h"
#include "server/common/ClientQuotas.h"
#include "server/common/InFlightCounter.h"
#include "server/tracing/RequestTracer.h"

namespace ortserve::common {

class InferAdmission {
 public:
  struct Options {
    // Called once per answered infer request; empty: no access log.
    AccessLogSink access_log{};
    // Null: tracing is off.
    std::shared_ptr<const tracing::RequestTracer> tracer{};
    // The kUnavailable message of a request refused after StopAccepting().
    std::string stopping_message = "server is shutting down";
    // Null: no client quotas.
    std::shared_ptr<ClientQuotas> quotas{};
  };

  // A request's admission by its client's quota, which a front end keeps
  // while the request waits (for a reload) so that it takes no second token.
  // A rate-only quota admits without a ticket, hence `acquired`.
  struct QuotaAdmission {
    std::shared_ptr<QuotaTicket> ticket{};
    bool acquired = false;
  };

  // Admit's quota check: the client's id in, the refusal out. A check
  // that CheckQuotaEarly() passed carries its admission on to Admit, which
  // then takes no second token, and the model it found, which Admit serves
  // while it is still ready instead of looking it up again (a model evicted
  // or unloaded meanwhile is looked up anew, so Admit answers as it would
  // have). The request handed to Admit names the model and version that
  // were checked.
  struct QuotaCheck {
    std::string_view client;
    std::optional<QuotaRejection> rejection;
    QuotaAdmission admitted{};
    std::shared_ptr<Model> model{};  // null: Admit looks the model up
  };

  // `repository` must outlive the admission.
  InferAdmission(ModelRepository* repository, Options options);
  InferAdmission(const InferAdmission&) = delete;
  InferAdmission& operator=(const InferAdmission&) = delete;

  void set_access_log(AccessLogSink sink) { options_.access_log = std::move(sink); }
  // True when requests may carry a trace context worth reading.
  bool tracing() const { return options_.tracer != nullptr; }
  // True when requests are checked against client quotas.
  bool quotas() const { return options_.quotas != nullptr; }

  // New requests are refused from now on. Idempotent.
  void StopAccepting() { accepting_.store(false, std::memory_order_release); }
  bool accepting() const { return accepting_.load(std::memory_order_acquire); }
  // Readiness turns false while requests are still accepted (the drain delay
  // before StopAccepting(), so that load balancers stop sending first). Idempotent.
  void MarkNotReady() { ready_.store(false, std::memory_order_release); }
  bool ready() const { return accepting() && ready_.load(std::memory_order_acquire); }

  // At a request's arrival. `traceparent`: the W3C header (metadata) value,
  // repeats joined by ','; nullopt when absent. `model`: the model it names,
  // whose trace settings apply.
  tracing::CompletionReport StartReport(std::optional<std::string_view> traceparent,
                                        std::string_view model = {}) const {
    return tracing::CompletionReport::Start(options_.access_log, options_.tracer, traceparent, model);
  }
  // kUnavailable with the stopping message once StopAccepting() was called.
  Status CheckAccepting() const;

  // The rule both front ends follow for on-demand loads: true when a request
  // for `model` must wait (ModelRepository::WhenLoaded) before it is admitted,
  // counting the wait in `load_waits` (the loads this request waited for).
  // Asked at arrival, after each load it waited for, and when Admit (or a
  // lookup before it) failed: a model loaded for a request, or found loaded,
  // can be evicted again (--model-memory-budget) before the request reaches
  // it, and the request then waits for its next load rather than failing,
  // kMaxLoadWaits loads in all.
  static constexpr int kMaxLoadWaits = 3;
  bool AwaitsAnotherLoad(const std::string& model, int& load_waits) const {
    if (load_waits >= kMaxLoadWaits || !repository_->NeedsLoad(model)) return false;
    ++load_waits;
    return true;
  }

  // The quota check before a request is decoded, so that a refusal costs
  // no decoding (or inflating): the status Admit would give (with
  // quota->rejection set) when the client is over its quota for `model`;
  // OK otherwise, with the ticket in `quota` for Admit. A request counts
  // against the rate once it is checked, even if its body then turns out to
  // be invalid. Models that are not loaded (unknown, or waiting for an
  // on-demand load) are left to Admit, which answers them as before and
  // keeps unknown names out of ortserve_quota_rejected_total. `quota` null,
  // already acquired, or quotas off: OK, and nothing looked up. The model
  // found goes on to Admit in quota->model.
  Status CheckQuotaEarly(const std::string& model, const std::string& version, QuotaCheck* quota);

  // See the contract above. `request` names its model and version; `quota`
  // null: no quota check.
  template <typename MakeDone>
  Status Admit(std::unique_ptr<InferenceRequest> request, CancelFlag cancelled,
               std::shared_ptr<RequestTrace> trace, MakeDone&& make_done, QuotaCheck* quota = nullptr);

  InFlightCounter& in_flight() { return in_flight_; }

 private:
  // The quota ticket of a request of `quota`'s client, or the refusal.
  Result<std::shared_ptr<QuotaTicket>> AcquireQuota(const std::string& model, QuotaCheck* quota);

  ModelRepository* const repository_;
  Options options_;
  std::atomic<bool> accepting_{true};
  std::atomic<bool> ready_{true};
  InFlightCounter in_flight_;
};

template <typename MakeDone>
Status InferAdmission::Admit(std::unique_ptr<InferenceRequest> request, CancelFlag cancelled,
                             std::shared_ptr<RequestTrace> trace, MakeDone&& make_done, QuotaCheck* quota) {
  std::shared_ptr<Model> model = quota != nullptr ? std::move(quota->model) : nullptr;
  if (model == nullptr || !model->ready()) {
    Result<std::shared_ptr<Model>> found = repository_->GetModel(request->model_name, request->model_version);
    if (!found.ok()) return found.status();
    model = std::move(found).value();
  }
  std::shared_ptr<QuotaTicket> ticket;
  if (quota != nullptr && quota->admitted.acquired) {
    ticket = std::move(quota->admitted.ticket);
  } else if (options_.quotas && quota != nullptr) {
    auto acquired = AcquireQuota(request->model_name, quota);
    if (!acquired.ok()) return acquired.status();
    ticket = std::move(acquired).value();
  }
  // From here on the version is the one that serves the request (the
  // request may have named none): lines logged meanwhile carry it.
  RequestLogScope log_scope(request->model_name, model->version(), request->id, trace.get());
  request->cancelled = std::move(cancelled);
  request->trace = std::move(trace);
  if (ticket) {
    request->on_complete = [done = std::forward<MakeDone>(make_done)(), counter = &in_flight_,
                            ticket = std::move(ticket)](Result<InferenceResponse> result) mutable {
      done(std::move(result));
      ticket->Release();
      counter->Done();
    };
  } else {
    request->on_complete = [done = std::forward<MakeDone>(make_done)(),
                            counter = &in_flight_](Result<InferenceResponse> result) mutable {
      done(std::move(result));
      counter->Done();
    };
  }
  in_flight_.Add();
  // Triton logs each request it prepares at verbose level 1 too.
  spdlog::debug("inference request '{}' for model '{}' admitted", request->id, request->model_name);
  model->Infer(std::move(request));
  return Status::Ok();
}

}  // namespace ortserve::common

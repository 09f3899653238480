#pragma once
// The scheduler seam: what a served model (serving/ServedModel.h) hands
// its admitted requests to, and how they come back. Three kinds implement it
// today: the dynamic batcher (scheduler/DynamicBatcher.h, every model without
// sequence_batching, batching or not), the sequence batcher
// (scheduler/SequenceBatcher.h, stateful models) and the ensemble scheduler
// (pipeline/EnsembleScheduler.h, `platform: "ensemble"`, above this layer
// because its steps are requests to other served models).
// repository/ModelBuilder.cpp picks one from the config; the front ends never
// see which one serves a model. A new kind implements this interface in
// scheduler/ when it needs only model instances, in pipeline/ when it calls
// other served models.
//
// Ownership: a request handed to Submit (or to TrySubmit, when it returns OK)
// belongs to the scheduler, which answers it exactly once through its
// RequestCompleter -- from a thread of its own, or synchronously inside
// Submit for a request refused at once. Every request it answers is counted
// once in the model's statistics (core/ModelStatistics.h).
//
// Preconditions: requests are admitted (ServedModel::Admit): inputs match the
// config, agree on the batch size, which is within max_batch_size, and the
// priority is within the configured levels. A scheduler relies on this and
// does not check it again.
//
// Thread safety: every method may be called from any thread at the same
// time. The completer is called with no scheduler lock held, and never for a
// request after Shutdown() has returned.
#include <cstddef>
#include <memory>

#include "core/InferenceRequest.h"
#include "core/Status.h"

namespace ortserve {

// Where a scheduler delivers each request it accepted, with its result. On
// success the response holds every output of the model, named, in the
// instance's order; choosing and shaping them is the completer's job.
class RequestCompleter {
 public:
  virtual ~RequestCompleter() = default;
  virtual void Complete(std::unique_ptr<InferenceRequest> request, Result<InferenceResponse> result) = 0;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // Takes the request. Refusals (a full queue: kUnavailable naming the
  // model and the limit; shutting down) are answered at once; a request
  // whose queue timeout passes before it runs is answered kUnavailable
  // "Request timeout expired ..." (as Triton) and never computed; a
  // cancelled one kCancelled.
  virtual void Submit(std::unique_ptr<InferenceRequest> request) = 0;

  // As Submit, except that a full queue leaves the request with the caller
  // (neither answered nor counted) and returns the kUnavailable saying so,
  // so that the caller can send it elsewhere (a fallback model). Ownership
  // moves to the scheduler iff the result is OK.
  virtual Status TrySubmit(std::unique_ptr<InferenceRequest>& request) = 0;

  // Whether `request`, queued now, is expected to wait longer than its queue
  // timeout; false while the scheduler has nothing to estimate from.
  virtual bool ExpectedToMissDeadline(const InferenceRequest& request) const = 0;

  // Stops accepting (later Submits are refused with kUnavailable "... is
  // shutting down"), finishes what is queued and running until
  // `abandon_at`, then answers what is left with kUnavailable and stops
  // running work. Every accepted request is answered before it returns.
  // Idempotent; a scheduler's destructor calls Shutdown(). Never call it from
  // a completer (it would wait for its own thread).
  virtual void Shutdown(Clock::time_point abandon_at) = 0;
  void Shutdown() { Shutdown(Clock::time_point::max()); }

  // Whether the scheduler can serve right now; an ensemble's says which
  // composing model cannot (the served model is not ready meanwhile).
  virtual Status Readiness() const { return Status::Ok(); }

  // Requests waiting, and instances running work, right now.
  virtual size_t QueueDepth() const = 0;
  virtual size_t BusyInstances() const = 0;
};

}  // namespace ortserve

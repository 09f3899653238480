#pragma once
// Answers a dynamic batcher's requests through its RequestCompleter and
// counts each once in the model's statistics, with Triton's semantics:
//  - per successful request: success (arrival to responses ready), queue
//    (enqueue to batch start) and compute_input/infer/output (the whole
//    batch's durations, count 1 per request);
//  - per failed request: fail (arrival to failure);
//  - per successful execution: the batch size's batch_stats, inference_count
//    += batch size, execution_count += 1, last_inference_ms;
//  - every request once in `outcomes` (rejected: queue full or shutting
//    down; timeout / cancelled: by the queue's policies or the run watchdog;
//    internal: the batch failed to run); successes and executions also feed
//    the histograms.
// Statistics are recorded before anyone is answered, so they never lag a
// response. Thread-safe (workers answer concurrently); never holds a lock.
#include <memory>
#include <string>
#include <vector>

#include "core/ModelStatistics.h"
#include "scheduler/BatchRunner.h"
#include "scheduler/RequestQueue.h"
#include "scheduler/Scheduler.h"
#include "scheduler/SchedulerClock.h"

namespace ortserve {

class RequestAnswerer {
 public:
  // Everything must outlive the answerer.
  RequestAnswerer(std::string label, ModelStatistics* stats, RequestCompleter* completer,
                  SchedulerClock* clock);

  // A request that never ran: answered `status`, counted as `outcome`.
  void Fail(std::unique_ptr<InferenceRequest> request, Status status, RequestOutcome outcome) const;
  // Requests the queue's policies took out (cancelled, or timed out).
  void Reject(std::vector<RejectedRequest>& rejected) const;
  // Every request of a batch that ended, as `run` says.
  void Answer(std::vector<QueuedRequest>& batch, BatchRun& run) const;
  // Shutdown past its deadline: what is still queued is answered 503 (logged
  // once, with the count).
  void AnswerAbandoned(std::vector<QueuedRequest>& left) const;

 private:
  void AnswerStopped(std::vector<QueuedRequest>& batch, RunWatchdog::RunEnd ending) const;
  void AnswerSucceeded(std::vector<QueuedRequest>& batch, BatchRun& run) const;

  const std::string label_;
  ModelStatistics* const stats_;
  RequestCompleter* const completer_;
  SchedulerClock* const clock_;
};

// Nanoseconds from `from` to `to`, 0 when `to` is not later.
uint64_t Nanos(Clock::time_point from, Clock::time_point to);

}  // namespace ortserve

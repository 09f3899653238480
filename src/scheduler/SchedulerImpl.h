#pragma once
// The ModelScheduler implementation, and the factory that lets tests inject
// a clock.
//
// Threads and roles (leader/followers): one worker per instance. Among the
// idle workers exactly one is the leader: it watches the queue, applies the
// queue policies, and waits (on leader_cv_, with a deadline from the clock)
// until the BatchAssembler says a batch is worth running; it then takes that
// batch out of the queue, hands the leader role on, and runs the batch on its
// own instance with no lock held. Other idle workers wait on follower_cv_ for
// the role. So batches are formed in one place (as Triton's batcher thread)
// and requests arriving during a batching window all reach the same batch.
//
// Invariants (under mu_): has_leader_ is true iff one worker is inside the
// leader section of NextBatch; queue_depth_ == queue_.size() whenever mu_ is
// released; after stopping_ no request enters the queue. Every request that
// Submit accepts is completed exactly once: run, or rejected by a policy, and
// its on_complete is always called with no scheduler lock held.
//
// Destruction: Shutdown() (also run by the destructor) drains the queue, joins
// the workers, and only then destroys the instances. Neither may be called
// from an on_complete callback (it would join its own thread). With a
// deadline (Shutdown(abandon_at), the server's --exit-timeout-secs) the drain
// stops there: the queue is emptied with kUnavailable answers and running
// batches are stopped like dead ones (the watchdog's mark and Terminate(),
// with abandoned_ telling the worker why, and keeping a batch taken just
// before from starting at all).
//
// Timeouts: a request whose queue timeout passes before its batch starts is
// answered kUnavailable "Request timeout expired ...", as Triton answers it
// (clients and perf_analyzer recognise it), and never computed; under
// TimeoutAction::kDelay it stays queued behind the other requests of its
// priority level instead. A request's timeout may shorten, never lengthen, its
// policy's default_timeout_us; with no default it applies as given.
//
// Deadlines during the run (the run watchdog): one watchdog thread per
// scheduler, started with the workers and joined after them, knows each
// worker's running batch (per request: its deadline and cancel flag). When
// every request of a running batch is dead -- its deadline has passed, or it
// was cancelled -- it sets the batch's `terminated` mark and calls the
// instance's Terminate(); the worker then answers each request as the queue
// would (kUnavailable "Request timeout expired ..." / kCancelled, counted as
// timeout / cancelled), counts stats->terminated_executions, and serves the
// next batch. A batch with one live request is never terminated; a batch
// with a request that has neither a deadline nor a cancel flag is not even
// watched. The watchdog sleeps on watch_cv_ until the earliest moment a
// watched batch could die (its latest live deadline), or until a request
// anywhere is cancelled (cancel_subscription_: core/Cancellation.h), and
// then looks at every running batch; it never polls. A starting batch wakes
// it only if it would sleep past the batch's latest deadline
// (watch_wake_at_): a batch of requests that can only be cancelled (HTTP and
// gRPC requests without a timeout) costs no wake-up at all.
// Per scheduler rather than per process because it uses the scheduler's clock
// (tests drive it with the fake clock) and must stop before the instances it
// terminates are destroyed; it costs one sleeping thread per model version.
// A Terminate() that lands just before Run() starts or after it returns does
// nothing to the instance (see ModelInstance); the worker still answers by
// the mark, so a batch found dead is never answered as a success.
//
// Adaptive batching window (options.adaptive_batch_window, the default): a
// fixed window (Triton's) makes every batch that is not full wait the whole
// max_queue_delay, even when no further request can come -- e.g. 32 closed-
// loop clients and max_batch_size 64 pay the whole window per batch for
// nothing. The leader instead asks forecast_ (ArrivalForecast.h: each answered
// request makes one arrival expected, for about as long as clients take to
// come back) and runs what is queued at once when no arrival is expected.
// The window still bounds every wait, so it only ever closes earlier than the
// fixed one; a lone request to an idle model runs at once.
//
// Balancing instances (options.balance_across_instances): the leader keeps
// only its share of the batch it planned (KeepOwnShare: the planned rows
// plus running_rows_, over balanced_runs_, the batches that can compute at
// once; with one, nothing is balanced or counted) and
// hands the leader role on with run_rest_now_ set: whoever plans next takes
// the rest with no window, since those requests were ready to run. Without
// it, 4 closed-loop clients of a compute-bound model with 2 single-thread
// instances settle into batches of 3 and 1: the instance with the 1 finishes
// first and idles until its one client is back, while the other works
// through three.
//
// Priorities: with priority_levels 0 the request's priority is ignored (as
// Triton); otherwise 0 means default_priority_level and a value above
// priority_levels is rejected with kInvalidArgument.
//
// Statistics (Triton's semantics): per successful request success (arrival to
// responses ready), queue (enqueue to batch start) and compute_input/infer/
// output (the whole batch's durations, count 1 per request); per failed
// request fail (arrival to failure). Per successful execution: batch_stats of
// the batch size, inference_count += batch size (summed dim 0; 1 per request
// without a batch dim), execution_count += 1, last_inference_ms.
// Metrics: every request completed here is counted once in stats->outcomes
// (invalid_input: rejected by Submit's checks or naming an unknown output;
// rejected: queue full or shutting down; timeout/cancelled: taken out by the
// queue policy; internal: the batch failed to run); successful requests and
// executions also feed the histograms.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "scheduler/ArrivalForecast.h"
#include "scheduler/BatchAssembler.h"
#include "scheduler/ModelScheduler.h"
#include "scheduler/RequestQueue.h"
#include "scheduler/SchedulerClock.h"
#include "scheduler/TensorStacker.h"

namespace ortserve {

// ModelScheduler::Create with an explicit clock.
Result<std::unique_ptr<ModelScheduler>> CreateModelScheduler(
    SchedulerOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
    ModelStatistics* stats, std::shared_ptr<SchedulerClock> clock);

class SchedulerImpl final : public ModelScheduler {
 public:
  // Options must be valid (see CreateModelScheduler); starts the workers.
  SchedulerImpl(SchedulerOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
                ModelStatistics* stats, std::shared_ptr<SchedulerClock> clock);
  ~SchedulerImpl() override;

  void Submit(std::unique_ptr<InferenceRequest> request) override;
  Status TrySubmit(std::unique_ptr<InferenceRequest>& request) override;
  bool ExpectedToMissDeadline(const InferenceRequest& request) const override;
  using ModelScheduler::Shutdown;
  void Shutdown(Clock::time_point abandon_at) override;
  size_t QueueDepth() const override { return queue_depth_.load(std::memory_order_relaxed); }
  size_t BusyInstances() const override { return busy_instances_.load(std::memory_order_relaxed); }

 private:
  void WorkerLoop(size_t index);
  // Blocks until this worker has something to do: a batch to run and/or
  // requests to reject. False when the worker should exit.
  bool NextBatch(std::vector<QueuedRequest>* batch, std::vector<RejectedRequest>* rejected);
  void ResignLeader();  // requires mu_
  // Balancing instances (balanced_runs_ > 1): trims the planned batch
  // `members` (>= 1) to this worker's share; true when it left some.
  // Requires mu_.
  bool KeepOwnShare(std::vector<QueuedRequest*>* members) const;
  // A batch of `rows` has ended, run or not.
  void EndRun(uint64_t rows);
  void Execute(size_t index, std::vector<QueuedRequest>& batch);
  // Queues the request; with `keep_when_full` a full queue leaves it with the
  // caller and returns why (see TrySubmit).
  Status SubmitImpl(std::unique_ptr<InferenceRequest>& request, bool keep_when_full);

  // ---- the run watchdog
  struct WatchedRequest {
    Clock::time_point deadline;           // max: none
    const CancelToken* cancelled;         // null: cannot be cancelled
  };
  struct RunningBatch {
    bool active = false;      // a batch is (about to be) running
    bool watched = false;     // every request can die: the watchdog looks at it
    bool terminated = false;  // found dead (or abandoned at shutdown) and terminated
    std::vector<WatchedRequest> requests;
    // What the watchdog looks at: running, able to die, not stopped yet.
    bool Watchable() const { return active && watched && !terminated; }
    // The batch dies when this passes: the latest deadline among its requests
    // not cancelled (min, i.e. already, when every one was cancelled).
    Clock::time_point LastLiveDeadline() const;
  };
  enum class RunEnd { kRan, kDead, kAbandoned };
  void WatchdogLoop();
  void WakeWatchdog();  // a request was cancelled somewhere: look again
  // Registers worker `index`'s batch as running (watched if it can ever
  // die). False when shutdown has abandoned the work: the batch must not
  // start.
  bool Watch(size_t index, const std::vector<QueuedRequest>& batch);
  // Ends the run's registration and says whether it was stopped, and why.
  RunEnd Unwatch(size_t index);
  // Shutdown past its deadline: empties the queue with kUnavailable answers
  // and stops the running batches.
  void Abandon();
  void RecordExecution(uint64_t ns);
  // Adaptive window: `answered` requests of a batch are about to be answered.
  void ForecastAnswered(uint64_t answered);

  // Validation done at Submit: the rows a request adds to a batch, or why it
  // cannot be scheduled.
  Result<uint64_t> BatchRows(const InferenceRequest& request) const;
  Result<uint32_t> PriorityLevel(const InferenceRequest& request) const;
  Result<InferenceResponse> BuildResponse(InferenceRequest& request,
                                          std::vector<Tensor> outputs) const;

  // Answers `status` and counts the request under `outcome`.
  void Fail(std::unique_ptr<InferenceRequest> request, Status status, RequestOutcome outcome);
  static void Complete(InferenceRequest& request, Result<InferenceResponse> result);

  const SchedulerOptions options_;
  const std::string label_;  // "model 'x' version '1'"
  const std::vector<std::unique_ptr<ModelInstance>> instances_;
  ModelStatistics* const stats_;
  const std::shared_ptr<SchedulerClock> clock_;
  const BatchAssembler assembler_;
  std::vector<TensorStacker> stackers_;  // one per worker, touched only by it
  const size_t balanced_runs_;           // batches that may run at once when balancing; 1: off

  mutable std::mutex mu_;
  std::condition_variable leader_cv_;    // the leader waits for requests/time
  std::condition_variable follower_cv_;  // idle non-leaders wait for the role
  std::condition_variable drained_cv_;   // Shutdown waits: a stopping worker is back
  RequestQueue queue_;                   // guarded by mu_
  bool has_leader_ = false;              // guarded by mu_
  bool run_rest_now_ = false;            // guarded by mu_: a leader left part of a ready batch
  bool stopping_ = false;                // guarded by mu_
  ArrivalForecast forecast_;             // guarded by mu_; adaptive window only

  // Written under mu_ (queue depth) or by workers, read anywhere lock-free.
  std::atomic<size_t> queue_depth_{0};
  std::atomic<size_t> busy_instances_{0};
  std::atomic<uint64_t> running_rows_{0};  // balancing: rows of the batches taken and not ended

  // Moving average (1/8 weight per execution) of a batch's start-to-end
  // time in ns; 0 until the first execution.
  std::atomic<uint64_t> average_execution_ns_{0};

  std::mutex watch_mu_;                  // never held while calling a worker's Run
  std::condition_variable watch_cv_;
  std::vector<RunningBatch> running_;    // guarded by watch_mu_; one per worker
  bool watch_stopping_ = false;          // guarded by watch_mu_
  // When the sleeping watchdog looks next (max: only when woken). Guarded by
  // watch_mu_; meaningful while it sleeps, which is whenever Watch can lock.
  Clock::time_point watch_wake_at_ = Clock::time_point::max();
  bool abandoned_ = false;               // guarded by watch_mu_
  // After the watchdog's state: gone before it while destroying.
  CancelSubscription cancel_subscription_{[this] { WakeWatchdog(); }};

  std::mutex shutdown_mu_;             // serialises Shutdown(); taken before mu_
  std::vector<std::thread> workers_;   // guarded by shutdown_mu_ after construction
  std::thread watchdog_;               // guarded by shutdown_mu_ after construction
};

}  // namespace ortserve

#pragma once
// The dynamic batcher: Triton's dynamic_batching (and one-at-a-time
// scheduling for models without it) behind the Scheduler seam. A bounded
// queue per priority level, one worker per instance, a run watchdog.
//
// Threads and roles (leader/followers): one worker per instance. Among the
// idle workers exactly one is the leader: it watches the queue, applies the
// queue policies, and waits (with a deadline from the clock) until the
// BatchPlanner says a batch is worth running; it then takes that batch out
// of the queue, hands the leader role on, and runs the batch on its own
// instance (BatchRunner) with no lock held. Other idle workers wait for the
// role. So batches are formed in one place (as Triton's batcher thread) and
// requests arriving during a batching window all reach the same batch.
//
// Invariants (under mu_): has_leader_ is true iff one worker is inside the
// leader section of NextBatch; queue_depth_ == queue_.size() whenever mu_ is
// released; after stopping_ no request enters the queue. Every request that
// Submit accepts is answered exactly once (RequestAnswerer), with no batcher
// lock held.
//
// Timeouts: a request whose queue timeout passes before its batch starts is
// answered kUnavailable "Request timeout expired ..." and never computed;
// under TimeoutAction::kDelay it stays queued behind the other requests of
// its priority level instead (RequestQueue). Once running, deadlines and
// cancellation are the RunWatchdog's.
//
// Priorities: with priority_levels 0 the request's priority is ignored (as
// Triton); otherwise 0 means default_priority_level.
//
// Inline runs (ComputePolicy::inline_run_max_us, opt-in per thread through
// core/InlineRuns.h): a cheap model's request that finds the queue empty, the
// leader idle and its instance not lent, compute slots free at once and a
// plan that releases it at once runs inside Submit on the submitting thread,
// on the leader's instance, which is lent for that run (lent_): the leader
// plans nothing for it meanwhile, and requests arriving meanwhile queue and
// batch as usual, planned when the instance comes back. The run is the
// worker's (BatchRunner, watchdog, statistics, answers): only its thread
// differs. Whether a run is cheap is the moving average of the model's runs
// so far, so the first runs are always the workers'.
//
// Destruction: Shutdown() (also run by the destructor) drains the queue,
// joins the workers and the watchdog, and only then destroys the instances.
// With a deadline the drain stops there: the queue is emptied with
// kUnavailable answers and running batches are stopped (RunWatchdog::
// Abandon), a batch taken just before is kept from starting at all.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/ModelStatistics.h"
#include "core/Mutex.h"
#include "runtime/ModelInstance.h"
#include "scheduler/BatchPlanner.h"
#include "scheduler/BatchRunner.h"
#include "scheduler/DynamicBatcherOptions.h"
#include "scheduler/InstanceBalancer.h"
#include "scheduler/RequestAnswerer.h"
#include "scheduler/RequestQueue.h"
#include "scheduler/RunWatchdog.h"
#include "scheduler/Scheduler.h"
#include "scheduler/SchedulerClock.h"

namespace ortserve {

class DynamicBatcher final : public Scheduler {
 public:
  // Validates the options and starts one worker per instance. `stats` and
  // `completer` must outlive the batcher; null `clock`: the steady clock.
  static Result<std::unique_ptr<DynamicBatcher>> Create(DynamicBatcherOptions options,
                                                        std::vector<std::unique_ptr<ModelInstance>> instances,
                                                        ModelStatistics* stats, RequestCompleter* completer,
                                                        std::shared_ptr<SchedulerClock> clock = nullptr);
  ~DynamicBatcher() override;

  void Submit(std::unique_ptr<InferenceRequest> request) override;
  Status TrySubmit(std::unique_ptr<InferenceRequest>& request) override;
  // The expected wait: executions ahead (queue depth, over max_batch_size
  // under dynamic batching) x a moving average of the recent execution time
  // / instances. Only for requests that a timeout would reject.
  bool ExpectedToMissDeadline(const InferenceRequest& request) const override;
  using Scheduler::Shutdown;
  void Shutdown(Clock::time_point abandon_at) override ORTSERVE_EXCLUDES(mu_);
  size_t QueueDepth() const override { return queue_depth_.load(std::memory_order_relaxed); }
  size_t BusyInstances() const override { return busy_instances_.load(std::memory_order_relaxed); }

 private:
  // What a worker takes from the queue: a batch to run and/or requests the
  // queue's policies took out.
  struct Work {
    std::vector<QueuedRequest> batch;
    std::vector<RejectedRequest> rejected;
  };

  DynamicBatcher(DynamicBatcherOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
                 ModelStatistics* stats, RequestCompleter* completer, std::shared_ptr<SchedulerClock> clock);

  void WorkerLoop(size_t index) ORTSERVE_EXCLUDES(mu_);
  // Blocks until this worker has work; false when it should exit.
  bool NextBatch(size_t index, Work* work) ORTSERVE_EXCLUDES(mu_);
  void ResignLeader() ORTSERVE_REQUIRES(mu_);
  // Runs `batch` on instance `index` into `run`, then answers from it.
  // `held`: compute slots leased already (inline); `lent`: the instance was
  // lent to an inline run, given back before the answers, so `run` must then
  // be the inline run's own: the instance's worker may start its next batch
  // into runs_[index] while these answers are still read from `run`.
  void Execute(size_t index, std::vector<QueuedRequest>& batch, BatchRun& run,
               std::optional<ComputeSlots::Lease> held = std::nullopt, bool lent = false) ORTSERVE_EXCLUDES(mu_);
  // Before taking mu_: whether `request` may run inline, with the compute
  // slots it would run under leased into `lease` (none without a budget).
  bool InlineCandidate(const InferenceRequest& request, std::optional<ComputeSlots::Lease>* lease) const;
  // Under mu_, the request just queued into an empty queue: takes the batch
  // the planner releases now and lends it the leader's instance; false
  // (nothing taken) when the leader is busy or lent, or the plan waits.
  bool TakeInline(Clock::time_point now, Work* work, size_t* index) ORTSERVE_REQUIRES(mu_);
  // Runs the taken batch on the caller's thread, then gives the instance back.
  void RunInline(size_t index, Work& work, std::optional<ComputeSlots::Lease> lease) ORTSERVE_EXCLUDES(mu_);
  void GiveBack(size_t index) ORTSERVE_EXCLUDES(mu_);
  // Queues the request; with `keep_when_full` a full queue leaves it with
  // the caller and returns why (TrySubmit).
  Status Enqueue(std::unique_ptr<InferenceRequest>& request, bool keep_when_full) ORTSERVE_EXCLUDES(mu_);
  // The request's priority level (admitted: within the levels).
  uint32_t LevelOf(const InferenceRequest& request) const;
  // Rows the admitted request adds to a batch: its dim 0, 1 without batching.
  uint64_t RowsOf(const InferenceRequest& request) const;
  // Shutdown past its deadline: the queue is answered 503, runs stopped.
  void Abandon() ORTSERVE_EXCLUDES(mu_);
  void RecordExecution(uint64_t ns);

  const DynamicBatcherOptions options_;
  const std::string label_;  // "model 'x' version '1'"
  const std::vector<std::unique_ptr<ModelInstance>> instances_;
  const std::shared_ptr<SchedulerClock> clock_;
  const std::vector<QueuePolicy> level_policies_;  // [level - 1]; the queue's, readable without mu_
  const RequestAnswerer answerer_;
  InstanceBalancer balancer_;
  RunWatchdog watchdog_;
  std::vector<BatchRunner> runners_;  // one per worker, touched only by it
  std::vector<BatchRun> runs_;        // one per worker, touched only by it

  mutable Mutex mu_;
  std::condition_variable leader_cv_;    // the leader waits for requests/time
  std::condition_variable follower_cv_;  // idle non-leaders wait for the role
  std::condition_variable drained_cv_;   // Shutdown waits: a stopping worker is back
  RequestQueue queue_ ORTSERVE_GUARDED_BY(mu_);
  BatchPlanner planner_ ORTSERVE_GUARDED_BY(mu_);
  bool has_leader_ ORTSERVE_GUARDED_BY(mu_) = false;
  size_t leader_index_ ORTSERVE_GUARDED_BY(mu_) = 0;  // meaningful while has_leader_
  std::vector<char> lent_ ORTSERVE_GUARDED_BY(mu_);   // per instance: running inline
  size_t inline_runs_ ORTSERVE_GUARDED_BY(mu_) = 0;  // callers inside RunInline
  bool stopping_ ORTSERVE_GUARDED_BY(mu_) = false;

  // Written under mu_ (queue depth) or by workers, read anywhere lock-free.
  std::atomic<size_t> queue_depth_{0};
  std::atomic<size_t> busy_instances_{0};
  // Moving average (1/8 weight per execution) of a batch's start-to-end
  // time in ns; 0 until the first execution.
  std::atomic<uint64_t> average_execution_ns_{0};

  Mutex shutdown_mu_ ORTSERVE_ACQUIRED_BEFORE(mu_);  // serialises Shutdown()
  std::vector<std::thread> workers_;  // started last, in the constructor
};

}  // namespace ortserve

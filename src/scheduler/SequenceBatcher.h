#pragma once
// The sequence batcher: Triton's sequence_batching behind the Scheduler
// seam, for stateful models. Every request names its sequence
// (InferenceRequest::sequence); a sequence holds one slot of one instance
// from its START to its END (SequenceTable), so all its requests run on that
// instance, in arrival order, one at a time, and the server fills the
// model's control inputs (SequenceControls) and feeds its implicit state
// back (SequenceStates).
//
// Threads: one worker per instance ("run-<model>"), and the run watchdog
// ("watch-<model>"), as the dynamic batcher. A worker serves its own
// instance's slots only: it applies the queue's policies, ends its idle
// sequences, plans a batch, runs it (BatchRunner: compute slots, stacking,
// the watchdog, the split), keeps the slots' state and answers
// (RequestAnswerer). A sequence's next request can only be planned by the
// same worker after its previous run was answered, which is what keeps a
// sequence's requests in order, at most one per batch, and its state
// consistent; the slots' states are that worker's alone (no lock).
//
// Strategies (SequencePolicy::Strategy):
//   direct  row r of a batch is slot r: slots 0..the highest with a request,
//           empty ones (and requests that cannot stack with the first) as
//           padding rows with READY false and the initial state; a batch
//           waits up to max_queue_delay_us until minimum_slot_utilization of
//           the slots have a request.
//   oldest  the oldest request of each candidate sequence, batched as the
//           dynamic batcher batches (BatchPlanner: preferred sizes, the
//           window, the adaptive window when batch_window is adaptive).
//
// A request that fails -- cancelled or timed out in the queue, stopped by
// the watchdog, its run or its state failed -- ends its sequence: the
// state is then undefined, so the sequence's queued requests are answered
// 503 with the reason and later ones are told why (SequenceTable).
//
// Invariants (under mu_): queue_depth_ is the sum of the queues' sizes
// whenever mu_ is released; after stopping_ nothing enters a queue; a
// slot's queued requests are in its instance's queue, in arrival order.
// Every request Submit accepts is answered exactly once, with no lock held.
//
// Shutdown (also run by the destructor): as the dynamic batcher's -- what is
// queued runs until `abandon_at`, then is answered 503 and running batches
// are stopped; sequences still open then are dropped with their state
// (counted as ended by shutdown).
#include <atomic>
#include <condition_variable>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/ModelStatistics.h"
#include "core/Mutex.h"
#include "runtime/ModelInstance.h"
#include "scheduler/BatchPlanner.h"
#include "scheduler/BatchRunner.h"
#include "scheduler/InstanceBalancer.h"
#include "scheduler/RequestAnswerer.h"
#include "scheduler/RequestQueue.h"
#include "scheduler/RunWatchdog.h"
#include "scheduler/Scheduler.h"
#include "scheduler/SchedulerClock.h"
#include "scheduler/SequenceBatcherOptions.h"
#include "scheduler/SequenceControls.h"
#include "scheduler/SequenceStates.h"
#include "scheduler/SequenceTable.h"

namespace ortserve {

class SequenceBatcher final : public Scheduler {
 public:
  // Validates the options and starts one worker per instance. `stats` and
  // `completer` must outlive the batcher; null `clock`: the steady clock.
  static Result<std::unique_ptr<SequenceBatcher>> Create(SequenceBatcherOptions options,
                                                         std::vector<std::unique_ptr<ModelInstance>> instances,
                                                         ModelStatistics* stats, RequestCompleter* completer,
                                                         std::shared_ptr<SchedulerClock> clock = nullptr);
  ~SequenceBatcher() override;

  void Submit(std::unique_ptr<InferenceRequest> request) override;
  // A full queue, or no free slot for a START, leaves the request with the
  // caller.
  Status TrySubmit(std::unique_ptr<InferenceRequest>& request) override;
  // No estimate: a sequence's requests cannot go elsewhere.
  bool ExpectedToMissDeadline(const InferenceRequest&) const override { return false; }
  using Scheduler::Shutdown;
  void Shutdown(Clock::time_point abandon_at) override ORTSERVE_EXCLUDES(mu_);
  size_t QueueDepth() const override { return queue_depth_.load(std::memory_order_relaxed); }
  size_t BusyInstances() const override { return busy_instances_.load(std::memory_order_relaxed); }

 private:
  // What a worker takes from its instance's queue.
  struct Work {
    std::vector<QueuedRequest> batch;  // direct: entry r is slot r
    std::vector<bool> padding;         // per batch entry: a padding row
    std::vector<RejectedRequest> rejected;  // taken out by the queue's policies
    std::vector<RejectedRequest> dropped;   // queued for sequences that ended early
    void Clear();
  };

  SequenceBatcher(SequenceBatcherOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
                  ModelStatistics* stats, RequestCompleter* completer, std::shared_ptr<SchedulerClock> clock);

  Status Enqueue(std::unique_ptr<InferenceRequest>& request, bool keep_when_full) ORTSERVE_EXCLUDES(mu_);
  // The rules that need no lock: batch size 1, the CORRID data type.
  Status CheckRequest(const InferenceRequest& request) const;
  // Routes and queues the request; `full`: refused for want of room.
  Status Route(std::unique_ptr<InferenceRequest>& request, uint32_t* instance, bool* full) ORTSERVE_REQUIRES(mu_);

  void WorkerLoop(uint32_t instance) ORTSERVE_EXCLUDES(mu_);
  // Blocks until the worker has work; false when it should exit.
  bool NextBatch(uint32_t instance, Work* work) ORTSERVE_EXCLUDES(mu_);
  // Fills `work` with the next batch, or says until when to wait.
  bool PlanDirect(uint32_t instance, Clock::time_point now, Work* work, Clock::time_point* wake_at)
      ORTSERVE_REQUIRES(mu_);
  bool PlanOldest(uint32_t instance, Clock::time_point now, Work* work, Clock::time_point* wake_at)
      ORTSERVE_REQUIRES(mu_);
  // The first queued request of each slot of `instance`, by slot (null:
  // none; the instance's scratch, the caller may change it), and the same in
  // queue order into `in_arrival_order` when given.
  std::vector<QueuedRequest*>& Heads(uint32_t instance, std::vector<QueuedRequest*>* in_arrival_order = nullptr)
      ORTSERVE_REQUIRES(mu_);
  // Takes `members` (in order; null: a padding row) out of the queue.
  void TakeBatch(uint32_t instance, const std::vector<QueuedRequest*>& members, Clock::time_point now, Work* work)
      ORTSERVE_REQUIRES(mu_);
  // Ends the sequence of each request the queue's policies took out.
  void EndRejected(uint32_t instance, Work* work) ORTSERVE_REQUIRES(mu_);
  // Ends the slot's sequence early for `why`: its queued requests go to
  // `dropped`, its state is released once the slot is free.
  void EndSequence(SlotRef slot, const std::string& why, std::vector<RejectedRequest>* dropped)
      ORTSERVE_REQUIRES(mu_);
  Clock::time_point ExpireIdle(uint32_t instance, Clock::time_point now) ORTSERVE_REQUIRES(mu_);

  void Execute(uint32_t instance, Work& work) ORTSERVE_EXCLUDES(mu_);
  // Adds the control and state inputs to every row of the batch.
  void AddSequenceInputs(uint32_t instance, Work& work) const;
  // Keeps the state of each row that ran; `failed` gets the rows whose state
  // could not be kept (taken out of the batch).
  void KeepStates(uint32_t instance, Work& work, BatchRun& run, std::vector<RejectedRequest>* failed);
  // After the run: the slots' bookkeeping, sequences ended by END or by a
  // failed run.
  void Settle(uint32_t instance, Work& work, const BatchRun& run, std::vector<RejectedRequest>& failed)
      ORTSERVE_EXCLUDES(mu_);
  void Abandon() ORTSERVE_EXCLUDES(mu_);
  void UpdateQueueDepth() ORTSERVE_REQUIRES(mu_);

  const SequenceBatcherOptions options_;
  const std::string label_;  // "model 'x' version '1'"
  const std::vector<std::unique_ptr<ModelInstance>> instances_;
  const std::shared_ptr<SchedulerClock> clock_;
  const RequestAnswerer answerer_;
  const SequenceControls controls_;
  InstanceBalancer balancer_;  // disabled: a sequence's instance is fixed
  RunWatchdog watchdog_;
  // One per instance, each touched only by that instance's worker.
  std::vector<BatchRunner> runners_;
  std::vector<BatchRun> runs_;
  std::vector<std::unique_ptr<SequenceStates>> states_;
  std::vector<std::condition_variable> wake_;  // a worker waits on its own

  mutable Mutex mu_;
  std::condition_variable drained_cv_;  // Shutdown waits: a stopping worker is back
  SequenceTable table_ ORTSERVE_GUARDED_BY(mu_);
  std::vector<RequestQueue> queues_ ORTSERVE_GUARDED_BY(mu_);    // per instance
  std::vector<BatchPlanner> planners_ ORTSERVE_GUARDED_BY(mu_);  // per instance (oldest)
  std::vector<std::vector<QueuedRequest*>> heads_ ORTSERVE_GUARDED_BY(mu_);  // scratch, per instance
  std::vector<std::vector<uint32_t>> freed_ ORTSERVE_GUARDED_BY(mu_);        // scratch, per instance
  bool stopping_ ORTSERVE_GUARDED_BY(mu_) = false;

  std::atomic<size_t> queue_depth_{0};
  std::atomic<size_t> busy_instances_{0};

  Mutex shutdown_mu_ ORTSERVE_ACQUIRED_BEFORE(mu_);  // serialises Shutdown()
  std::vector<std::thread> workers_;  // started last, in the constructor
};

}  // namespace ortserve

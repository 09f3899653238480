#include "scheduler/DynamicBatcher.h"

#include <algorithm>

#include "core/InlineRuns.h"
#include "core/ThreadName.h"
#include "scheduler/SchedulerParts.h"

namespace ortserve {
namespace {

std::vector<QueuePolicy> LevelPolicies(const QueueingPolicy& queueing) {
  std::vector<QueuePolicy> policies(std::max<uint32_t>(queueing.priority_levels, 1), queueing.default_policy);
  for (const auto& [level, policy] : queueing.level_policies) policies[level - 1] = policy;
  return policies;
}

}  // namespace

Result<std::unique_ptr<DynamicBatcher>> DynamicBatcher::Create(
    DynamicBatcherOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
    ModelStatistics* stats, RequestCompleter* completer, std::shared_ptr<SchedulerClock> clock) {
  ORTSERVE_RETURN_IF_ERROR(CheckSchedulerParts(options.Label(), instances, stats, completer));
  ORTSERVE_RETURN_IF_ERROR(options.Validate());
  if (!clock) clock = std::make_shared<SteadySchedulerClock>();
  return std::unique_ptr<DynamicBatcher>(
      new DynamicBatcher(std::move(options), std::move(instances), stats, completer, std::move(clock)));
}

DynamicBatcher::DynamicBatcher(DynamicBatcherOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
                               ModelStatistics* stats, RequestCompleter* completer,
                               std::shared_ptr<SchedulerClock> clock)
    : options_(std::move(options)),
      label_(options_.Label()),
      instances_(std::move(instances)),
      clock_(std::move(clock)),
      level_policies_(LevelPolicies(options_.queueing)),
      answerer_(label_, stats, completer, clock_.get()),
      balancer_(options_.compute, instances_.size()),
      watchdog_(options_.model_name, InstancePointers(instances_), clock_.get()),
      runs_(instances_.size()),
      queue_(label_, level_policies_, options_.queueing.default_max_queue_size),
      planner_(options_.batching, instances_.size(), &balancer_),
      lent_(instances_.size(), 0) {
  runners_.reserve(instances_.size());
  for (size_t i = 0; i < instances_.size(); ++i) {
    runners_.emplace_back(i, instances_[i].get(), &options_, &watchdog_, clock_.get());
  }
  workers_.reserve(instances_.size());
  for (size_t i = 0; i < instances_.size(); ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

DynamicBatcher::~DynamicBatcher() { Shutdown(); }

uint32_t DynamicBatcher::LevelOf(const InferenceRequest& request) const {
  const QueueingPolicy& q = options_.queueing;
  if (q.priority_levels == 0) return 1;
  if (request.priority == 0) return q.default_priority_level;
  return std::min(request.priority, q.priority_levels);
}

uint64_t DynamicBatcher::RowsOf(const InferenceRequest& request) const {
  if (options_.batching.max_batch_size == 0 || request.inputs.empty() || request.inputs[0].shape.empty()) return 1;
  return static_cast<uint64_t>(std::max<int64_t>(request.inputs[0].shape[0], 0));
}

void DynamicBatcher::Submit(std::unique_ptr<InferenceRequest> request) {
  (void)Enqueue(request, /*keep_when_full=*/false);
}

Status DynamicBatcher::TrySubmit(std::unique_ptr<InferenceRequest>& request) {
  return Enqueue(request, /*keep_when_full=*/true);
}

bool DynamicBatcher::ExpectedToMissDeadline(const InferenceRequest& request) const {
  const uint64_t average_ns = average_execution_ns_.load(std::memory_order_relaxed);
  if (average_ns == 0) return false;
  const QueuePolicy& policy = level_policies_[LevelOf(request) - 1];
  if (policy.timeout_action != QueuePolicy::TimeoutAction::kReject) return false;
  const uint64_t timeout_us = RequestQueue::EffectiveTimeoutUs(request, policy);
  if (timeout_us == 0) return false;
  uint64_t executions = QueueDepth();
  if (options_.batching.max_batch_size > 0 && options_.batching.dynamic_batching) {
    const auto per_batch = static_cast<uint64_t>(options_.batching.max_batch_size);
    executions = (executions + per_batch - 1) / per_batch;
  }
  const long double wait_ns =
      static_cast<long double>(executions) * average_ns / static_cast<long double>(instances_.size());
  return wait_ns > static_cast<long double>(timeout_us) * 1000.0L;
}

Status DynamicBatcher::Enqueue(std::unique_ptr<InferenceRequest>& request, bool keep_when_full) {
  if (!request) return Status::Ok();
  const uint32_t level = LevelOf(*request);
  const uint64_t rows = RowsOf(*request);
  std::optional<ComputeSlots::Lease> inline_lease;
  const bool inline_candidate = InlineCandidate(*request, &inline_lease);
  Work inline_work;
  size_t inline_index = 0;
  bool run_inline = false;
  Status status;
  bool queue_full = false;
  bool wake_leader = false;
  bool wake_follower = false;
  {
    MutexLock lock(mu_, MutexLock::kSpinFirst);
    if (stopping_) {
      status = Unavailable(label_ + " is shutting down");
    } else {
      const Clock::time_point now = clock_->Now();
      const bool was_empty = queue_.empty();
      status = queue_.Push(request, level, rows, now);
      queue_full = !status.ok();
      if (status.ok()) {
        planner_.Arrived(now);
        run_inline = inline_candidate && was_empty && TakeInline(now, &inline_work, &inline_index);
      }
      queue_depth_.store(queue_.size(), std::memory_order_relaxed);
      // A leader whose instance is lent is woken when it comes back.
      wake_leader = !run_inline && has_leader_ && !lent_[leader_index_];
      wake_follower = !run_inline && !has_leader_;
    }
  }
  if (queue_full && keep_when_full) return status;
  if (!status.ok()) {
    answerer_.Fail(std::move(request), std::move(status), RequestOutcome::kRejected);
    return Status::Ok();
  }
  if (run_inline) {
    RunInline(inline_index, inline_work, std::move(inline_lease));
    return Status::Ok();
  }
  // Notified after unlocking: the woken thread re-checks the queue under mu_,
  // which already holds this request, so no wake-up is lost.
  if (wake_leader) {
    leader_cv_.notify_one();
  } else if (wake_follower) {
    follower_cv_.notify_one();
  }
  return Status::Ok();
}

bool DynamicBatcher::InlineCandidate(const InferenceRequest& request,
                                     std::optional<ComputeSlots::Lease>* lease) const {
  const uint64_t bound_us = options_.compute.inline_run_max_us;
  if (bound_us == 0 || !InlineRunsAllowed()) return false;
  // Only runs measured cheap: the first runs are always the workers'.
  const uint64_t average_ns = average_execution_ns_.load(std::memory_order_relaxed);
  if (average_ns == 0 || average_ns >= bound_us * 1000) return false;
  if (queue_depth_.load(std::memory_order_relaxed) != 0) return false;
  if (busy_instances_.load(std::memory_order_relaxed) >= instances_.size()) return false;
  size_t bytes = 0;
  for (const Tensor& input : request.inputs) bytes += input.data.size();
  if (bytes > ComputePolicy::kInlineRunMaxInputBytes) return false;
  if (const auto& slots = options_.compute.slots) {
    auto leased = slots->TryAcquire(options_.compute.slots_per_run);
    if (!leased) return false;  // the budget is in use: the worker waits for it
    lease->emplace(std::move(*leased));
  }
  return true;
}

bool DynamicBatcher::TakeInline(Clock::time_point now, Work* work, size_t* index) {
  if (!has_leader_ || lent_[leader_index_]) return false;
  BatchPlan plan = planner_.Plan(queue_, now, /*stopping=*/false);
  if (plan.members.empty()) return false;  // the batching window holds it
  work->batch = queue_.Take(plan.members);
  if (queue_.empty()) planner_.QueueEmptied();
  busy_instances_.fetch_add(1, std::memory_order_relaxed);
  *index = leader_index_;
  lent_[*index] = 1;
  ++inline_runs_;
  return true;
}

void DynamicBatcher::RunInline(size_t index, Work& work, std::optional<ComputeSlots::Lease> lease) {
  // Counted out however Execute leaves (an answer callback may throw), or
  // Shutdown would wait for this run for ever.
  struct Ended {
    DynamicBatcher* batcher;
    ~Ended() {
      MutexLock lock(batcher->mu_, MutexLock::kSpinFirst);
      --batcher->inline_runs_;
      if (batcher->stopping_) batcher->drained_cv_.notify_all();  // Shutdown may wait for the last inline run
    }
  } ended{this};
  InlineRunsScope no_nesting(nullptr);
  BatchRun run;
  Execute(index, work.batch, run, std::move(lease), /*lent=*/true);
}

void DynamicBatcher::GiveBack(size_t index) {
  bool wake_leader;
  {
    MutexLock lock(mu_, MutexLock::kSpinFirst);
    lent_[index] = 0;
    // Requests that queued meanwhile wait for this instance's leader.
    wake_leader = has_leader_ && leader_index_ == index && (!queue_.empty() || stopping_);
  }
  if (wake_leader) leader_cv_.notify_one();
}

void DynamicBatcher::Shutdown(Clock::time_point abandon_at) {
  MutexLock shutdown_lock(shutdown_mu_);
  bool drained;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    leader_cv_.notify_all();
    follower_cv_.notify_all();
    // Workers notify drained_cv_ under mu_ each time they come back for work
    // while stopping, so this re-check cannot miss the last one.
    for (;;) {
      drained = queue_.empty() && busy_instances_.load() == 0 && inline_runs_ == 0;
      if (drained || abandon_at == Clock::time_point::max() || clock_->Now() >= abandon_at) break;
      clock_->WaitUntil(drained_cv_, lock.native(), abandon_at);
    }
  }
  if (!drained && abandon_at != Clock::time_point::max()) Abandon();
  {
    // Inline runs end on their callers' threads, after the drain above.
    MutexLock lock(mu_);
    while (inline_runs_ > 0) lock.Wait(drained_cv_);
  }
  for (std::thread& worker : workers_)
    if (worker.joinable()) worker.join();
  // After the workers: no batch runs any more, so nothing is left to watch.
  watchdog_.Stop();
}

void DynamicBatcher::Abandon() {
  std::vector<QueuedRequest> left;
  {
    MutexLock lock(mu_);
    std::vector<QueuedRequest*> all;
    queue_.Scan([&](QueuedRequest& entry) {
      all.push_back(&entry);
      return true;
    });
    left = queue_.Take(all);
    queue_depth_.store(0, std::memory_order_relaxed);
  }
  watchdog_.Abandon();
  answerer_.AnswerAbandoned(left);
}

void DynamicBatcher::WorkerLoop(size_t index) {
  SetCurrentThreadName("run-" + options_.model_name);
  Work work;
  for (;;) {
    work.batch.clear();
    work.rejected.clear();
    const bool keep_running = NextBatch(index, &work);
    answerer_.Reject(work.rejected);
    if (!work.batch.empty()) Execute(index, work.batch, runs_[index]);
    if (!keep_running) return;
  }
}

void DynamicBatcher::ResignLeader() {
  has_leader_ = false;
  if (!queue_.empty() || stopping_) follower_cv_.notify_one();
}

bool DynamicBatcher::NextBatch(size_t index, Work* work) {
  MutexLock lock(mu_, MutexLock::kSpinFirst);
  if (stopping_) drained_cv_.notify_all();  // Shutdown may be waiting for the drain
  while (has_leader_) lock.Wait(follower_cv_);
  has_leader_ = true;
  leader_index_ = index;
  for (;;) {
    const Clock::time_point now = clock_->Now();
    const Clock::time_point next_deadline = queue_.ApplyPolicies(now, &work->rejected);
    if (!work->rejected.empty()) {
      // Answer them (outside the lock) before anything else waits.
      queue_depth_.store(queue_.size(), std::memory_order_relaxed);
      ResignLeader();
      return true;
    }
    if (queue_.empty()) {
      planner_.QueueEmptied();
      if (stopping_) {
        ResignLeader();
        return false;
      }
      lock.Wait(leader_cv_);
      continue;
    }
    if (lent_[index]) {
      // Its instance runs a batch inline; GiveBack wakes it.
      if (next_deadline == Clock::time_point::max()) {
        lock.Wait(leader_cv_);
      } else {
        clock_->WaitUntil(leader_cv_, lock.native(), next_deadline);
      }
      continue;
    }
    BatchPlan plan = planner_.Plan(queue_, now, stopping_);
    if (!plan.members.empty()) {
      work->batch = queue_.Take(plan.members);
      queue_depth_.store(queue_.size(), std::memory_order_relaxed);
      busy_instances_.fetch_add(1, std::memory_order_relaxed);
      ResignLeader();
      return true;
    }
    const Clock::time_point wake_at = std::min(plan.wake_at, next_deadline);
    if (wake_at == Clock::time_point::max()) {
      lock.Wait(leader_cv_);
    } else {
      clock_->WaitUntil(leader_cv_, lock.native(), wake_at);
    }
  }
}

void DynamicBatcher::Execute(size_t index, std::vector<QueuedRequest>& batch, BatchRun& run,
                             std::optional<ComputeSlots::Lease> held, bool lent) {
  runners_[index].Run(batch, &run, std::move(held));
  if (run.ending == RunWatchdog::RunEnd::kRan && run.status.ok()) RecordExecution(Nanos(run.start, run.end));
  if (options_.batching.adaptive_window) {
    // Before any answer leaves: a client answered may send its next request
    // before this worker is back at the queue.
    MutexLock lock(mu_, MutexLock::kSpinFirst);
    planner_.Answered(batch.size(), clock_->Now());
  }
  busy_instances_.fetch_sub(1, std::memory_order_relaxed);
  balancer_.Ended(run.rows);
  if (lent) GiveBack(index);  // before the answers, for the same reason
  answerer_.Answer(batch, run);
}

void DynamicBatcher::RecordExecution(uint64_t ns) {
  uint64_t old = average_execution_ns_.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    next = old == 0 ? std::max<uint64_t>(ns, 1) : std::max<uint64_t>((old * 7 + ns) / 8, 1);
  } while (!average_execution_ns_.compare_exchange_weak(old, next, std::memory_order_relaxed));
}

}  // namespace ortserve

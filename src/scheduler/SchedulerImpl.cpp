#include "scheduler/SchedulerImpl.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>

#include <spdlog/spdlog.h>

#include "core/ThreadName.h"
#include "scheduler/BatchTracing.h"

namespace ortserve {
namespace {

std::string Label(const SchedulerOptions& options) {
  return "model '" + options.model_name + "' version '" + options.model_version + "'";
}

// Batches of one model that can compute at once when balancing: its
// instances, as far as the thread budget's compute slots go; 1 (nothing to
// balance) with the option off.
size_t BalancedRuns(const SchedulerOptions& options, size_t instances) {
  if (!options.balance_across_instances) return 1;
  if (!options.compute_slots) return instances;
  const int per_run = std::max(1, options.compute_slots_per_run);
  return std::min(instances, static_cast<size_t>(std::max(1, options.compute_slots->total() / per_run)));
}

uint64_t Rows(const std::vector<QueuedRequest*>& members) {
  uint64_t rows = 0;
  for (const QueuedRequest* m : members) rows += m->batch_size;
  return rows;
}

std::vector<QueuePolicy> LevelPolicies(const SchedulerOptions& options) {
  std::vector<QueuePolicy> policies(std::max<uint32_t>(options.priority_levels, 1),
                                    options.default_queue_policy);
  for (const auto& [level, policy] : options.priority_queue_policies) policies[level - 1] = policy;
  return policies;
}

// Takes mu, spinning a little first when it is held. The scheduler's lock is
// held for about a microsecond at a time (a front end queueing a request, the
// leader planning a batch), while a thread that sleeps on it costs a futex
// wait here and a futex wake in the holder, each several microseconds on a
// virtual machine: at tiny-model rates the I/O thread slept on it often
// enough that waking it was 7% of the worker's time (bench/FINDINGS.md,
// stop 14). The spin is bounded (a holder that lost its core is not waited
// for long) and yields the core's pipeline to a hyper-thread sibling.
std::unique_lock<std::mutex> LockSoon(std::mutex& mu) {
  constexpr int kSpins = 64;
  for (int i = 0; i < kSpins; ++i) {
    if (mu.try_lock()) return std::unique_lock<std::mutex>(mu, std::adopt_lock);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }
  return std::unique_lock<std::mutex>(mu);
}

uint64_t Nanos(Clock::time_point from, Clock::time_point to) {
  if (to <= from) return 0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count());
}

uint64_t WallClockMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

Status ValidateOptions(const SchedulerOptions& o,
                       const std::vector<std::unique_ptr<ModelInstance>>& instances,
                       const ModelStatistics* stats) {
  const std::string label = Label(o);
  if (instances.empty()) return InvalidArgument(label + " has no instances to schedule on");
  for (const auto& instance : instances)
    if (!instance) return InvalidArgument(label + ": null model instance");
  if (!stats) return InvalidArgument(label + ": no statistics object");
  if (o.max_batch_size < 0) {
    return InvalidArgument(label + ": max_batch_size " + std::to_string(o.max_batch_size) +
                           " is negative");
  }
  if (o.max_batch_size > 0 && o.dynamic_batching) {
    for (int size : o.preferred_batch_sizes) {
      if (size < 1 || size > o.max_batch_size) {
        return InvalidArgument(label + ": preferred batch size " + std::to_string(size) +
                               " is outside 1..max_batch_size " + std::to_string(o.max_batch_size));
      }
    }
  }
  if (o.priority_levels > 0 &&
      (o.default_priority_level < 1 || o.default_priority_level > o.priority_levels)) {
    return InvalidArgument(label + ": default_priority_level " +
                           std::to_string(o.default_priority_level) + " is outside 1..priority_levels " +
                           std::to_string(o.priority_levels));
  }
  for (const auto& [level, policy] : o.priority_queue_policies) {
    if (level < 1 || level > o.priority_levels) {
      return InvalidArgument(label + ": priority_queue_policy for level " + std::to_string(level) +
                             " is outside 1..priority_levels " + std::to_string(o.priority_levels));
    }
  }
  if (o.default_max_queue_size == 0) {
    return InvalidArgument(label + ": default_max_queue_size must be positive");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<ModelScheduler>> CreateModelScheduler(
    SchedulerOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
    ModelStatistics* stats, std::shared_ptr<SchedulerClock> clock) {
  ORTSERVE_RETURN_IF_ERROR(ValidateOptions(options, instances, stats));
  if (!clock) clock = std::make_shared<SteadySchedulerClock>();
  return std::unique_ptr<ModelScheduler>(std::make_unique<SchedulerImpl>(
      std::move(options), std::move(instances), stats, std::move(clock)));
}

SchedulerImpl::SchedulerImpl(SchedulerOptions options,
                             std::vector<std::unique_ptr<ModelInstance>> instances,
                             ModelStatistics* stats, std::shared_ptr<SchedulerClock> clock)
    : options_(std::move(options)),
      label_(Label(options_)),
      instances_(std::move(instances)),
      stats_(stats),
      clock_(std::move(clock)),
      assembler_(options_.max_batch_size, options_.dynamic_batching,
                 options_.preferred_batch_sizes, options_.max_queue_delay_us),
      stackers_(instances_.size()),
      balanced_runs_(BalancedRuns(options_, instances_.size())),
      queue_(label_, LevelPolicies(options_), options_.default_max_queue_size),
      forecast_(static_cast<uint64_t>(std::max(options_.max_batch_size, 1)) * instances_.size()),
      running_(instances_.size()) {
  workers_.reserve(instances_.size());
  for (size_t i = 0; i < instances_.size(); ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
  watchdog_ = std::thread([this] { WatchdogLoop(); });
}

SchedulerImpl::~SchedulerImpl() { Shutdown(); }

Result<uint32_t> SchedulerImpl::PriorityLevel(const InferenceRequest& request) const {
  if (options_.priority_levels == 0) return 1u;
  if (request.priority == 0) return options_.default_priority_level;
  if (request.priority > options_.priority_levels) {
    return InvalidArgument("request '" + request.id + "' priority " +
                           std::to_string(request.priority) + " exceeds " + label_ +
                           " priority_levels " + std::to_string(options_.priority_levels));
  }
  return request.priority;
}

Result<uint64_t> SchedulerImpl::BatchRows(const InferenceRequest& request) const {
  if (options_.max_batch_size == 0 || request.inputs.empty()) return uint64_t{1};
  int64_t rows = -1;
  for (const Tensor& input : request.inputs) {
    // Cheap re-check of the caller's validation, so that one malformed
    // request cannot fail the batch it would join. (BYTES are left to the
    // front end: checking them means walking every element.)
    if (input.dtype != DataType::kBytes) {
      auto bytes = FixedByteSize(input.dtype, input.shape);
      if (!bytes || *bytes != input.data.size()) {
        return InvalidArgument("input '" + input.name + "' of request '" + request.id + "' has " +
                               std::to_string(input.data.size()) + " bytes of data for shape " +
                               ShapeToString(input.shape));
      }
    }
    if (input.shape.empty()) {
      return InvalidArgument("input '" + input.name + "' of " + label_ +
                             " needs a batch dimension, got shape []");
    }
    if (rows >= 0 && input.shape[0] != rows) {
      return InvalidArgument("inputs of request '" + request.id + "' disagree on the batch size: '" +
                             input.name + "' has " + std::to_string(input.shape[0]) + ", expected " +
                             std::to_string(rows));
    }
    rows = input.shape[0];
  }
  if (rows < 1 || rows > options_.max_batch_size) {
    return InvalidArgument("batch size " + std::to_string(rows) + " of request '" + request.id +
                           "' is outside 1..max_batch_size " +
                           std::to_string(options_.max_batch_size) + " of " + label_);
  }
  return static_cast<uint64_t>(rows);
}

void SchedulerImpl::Submit(std::unique_ptr<InferenceRequest> request) {
  (void)SubmitImpl(request, /*keep_when_full=*/false);
}

Status SchedulerImpl::TrySubmit(std::unique_ptr<InferenceRequest>& request) {
  return SubmitImpl(request, /*keep_when_full=*/true);
}

bool SchedulerImpl::ExpectedToMissDeadline(const InferenceRequest& request) const {
  const uint64_t average_ns = average_execution_ns_.load(std::memory_order_relaxed);
  if (average_ns == 0) return false;
  Result<uint32_t> level = PriorityLevel(request);
  if (!level.ok()) return false;  // Submit answers it
  const QueuePolicy& policy = queue_.policy(*level);  // immutable after construction
  if (policy.timeout_action != QueuePolicy::TimeoutAction::kReject) return false;
  const uint64_t timeout_us = RequestQueue::EffectiveTimeoutUs(request, policy);
  if (timeout_us == 0) return false;
  uint64_t executions = QueueDepth();
  if (options_.max_batch_size > 0 && options_.dynamic_batching) {
    const auto per_batch = static_cast<uint64_t>(options_.max_batch_size);
    executions = (executions + per_batch - 1) / per_batch;
  }
  const long double wait_ns = static_cast<long double>(executions) * average_ns /
                              static_cast<long double>(instances_.size());
  return wait_ns > static_cast<long double>(timeout_us) * 1000.0L;
}

Status SchedulerImpl::SubmitImpl(std::unique_ptr<InferenceRequest>& request, bool keep_when_full) {
  if (!request) return Status::Ok();
  Result<uint32_t> level = PriorityLevel(*request);
  if (!level.ok()) {
    Fail(std::move(request), level.status(), RequestOutcome::kInvalidInput);
    return Status::Ok();
  }
  Result<uint64_t> rows = BatchRows(*request);
  if (!rows.ok()) {
    Fail(std::move(request), rows.status(), RequestOutcome::kInvalidInput);
    return Status::Ok();
  }

  Status status;
  bool queue_full = false;
  bool wake_leader = false;
  {
    std::unique_lock<std::mutex> lock = LockSoon(mu_);
    if (stopping_) {
      status = Unavailable(label_ + " is shutting down");
    } else {
      const Clock::time_point now = clock_->Now();
      status = queue_.Push(request, *level, *rows, now);
      queue_full = !status.ok();
      if (status.ok() && options_.adaptive_batch_window) forecast_.Arrived(now);
      queue_depth_.store(queue_.size(), std::memory_order_relaxed);
      wake_leader = has_leader_;
    }
  }
  if (queue_full && keep_when_full) return status;
  if (!status.ok()) {
    Fail(std::move(request), std::move(status), RequestOutcome::kRejected);
    return Status::Ok();
  }
  // Notified after unlocking: the woken thread re-checks the queue under mu_,
  // which already holds this request, so no wake-up is lost.
  if (wake_leader) {
    leader_cv_.notify_one();
  } else {
    follower_cv_.notify_one();
  }
  return Status::Ok();
}

void SchedulerImpl::Shutdown(Clock::time_point abandon_at) {
  std::lock_guard<std::mutex> shutdown_lock(shutdown_mu_);
  bool drained;
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    leader_cv_.notify_all();
    follower_cv_.notify_all();
    // Workers notify drained_cv_ under mu_ each time they come back for work
    // while stopping, so this re-check cannot miss the last one.
    auto is_drained = [&] { return queue_.empty() && busy_instances_.load() == 0; };
    while (!(drained = is_drained()) && abandon_at != Clock::time_point::max() &&
           clock_->Now() < abandon_at) {
      clock_->WaitUntil(drained_cv_, lock, abandon_at);
    }
  }
  if (!drained && abandon_at != Clock::time_point::max()) Abandon();
  for (std::thread& worker : workers_)
    if (worker.joinable()) worker.join();
  // After the workers: no batch runs any more, so nothing is left to watch.
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

bool SchedulerImpl::Watch(size_t index, const std::vector<QueuedRequest>& batch) {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    RunningBatch& running = running_[index];
    running.active = true;
    running.terminated = abandoned_;
    if (abandoned_) return false;
    running.watched = true;
    running.requests.clear();  // keeps its capacity: no allocation once warm
    for (const QueuedRequest& entry : batch) {
      const CancelToken* cancelled = entry.request->cancelled.get();
      // A request that can neither expire nor be cancelled keeps the whole
      // batch alive: nothing to watch.
      if (cancelled == nullptr && entry.deadline == Clock::time_point::max()) {
        running.requests.clear();
        running.watched = false;
        return true;
      }
      running.requests.push_back({entry.deadline, cancelled});
    }
    // A further cancellation wakes the watchdog itself; otherwise the batch
    // can first be found dead at its last live deadline (already, if all its
    // requests were cancelled since the queue let them go).
    if (running.LastLiveDeadline() >= watch_wake_at_) return true;  // it will look in time anyway
  }
  watch_cv_.notify_one();
  return true;
}

SchedulerImpl::RunEnd SchedulerImpl::Unwatch(size_t index) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  RunningBatch& running = running_[index];
  const bool terminated = running.active && running.terminated;
  running.active = false;
  running.watched = false;
  running.terminated = false;
  if (!terminated) return RunEnd::kRan;
  return abandoned_ ? RunEnd::kAbandoned : RunEnd::kDead;
}

void SchedulerImpl::Abandon() {
  std::vector<QueuedRequest> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<QueuedRequest*> all;
    queue_.Scan([&](QueuedRequest& entry) {
      all.push_back(&entry);
      return true;
    });
    left = queue_.Take(all);
    queue_depth_.store(0, std::memory_order_relaxed);
  }
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    abandoned_ = true;
    for (size_t i = 0; i < running_.size(); ++i) {
      if (!running_[i].active || running_[i].terminated) continue;
      running_[i].terminated = true;
      instances_[i]->Terminate();  // thread-safe, returns at once
    }
  }
  if (!left.empty()) {
    spdlog::warn("{}: exit timeout reached with {} request(s) still queued; answering them 503",
                 label_, left.size());
  }
  for (QueuedRequest& entry : left) {
    const std::string id = entry.request->id;
    Fail(std::move(entry.request),
         Unavailable(label_ + " is shutting down: request '" + id +
                     "' was not run before the exit timeout"),
         RequestOutcome::kRejected);
  }
}

Clock::time_point SchedulerImpl::RunningBatch::LastLiveDeadline() const {
  Clock::time_point last = Clock::time_point::min();
  for (const WatchedRequest& r : requests) {
    if (r.cancelled == nullptr || !r.cancelled->IsCancelled()) last = std::max(last, r.deadline);
  }
  return last;
}

void SchedulerImpl::WakeWatchdog() {
  {
    // Under the lock, the wake-up comes after the watchdog's last look (a
    // token cancelled while it looks is seen by its next one), and a batch
    // that starts after this finds the token cancelled itself (Watch).
    std::lock_guard<std::mutex> lock(watch_mu_);
    // Nothing of ours running: no thread to wake (every scheduler hears of
    // every cancellation, and clients giving up under overload are many).
    if (std::none_of(running_.begin(), running_.end(), [](const RunningBatch& r) { return r.Watchable(); })) return;
  }
  watch_cv_.notify_one();
}

void SchedulerImpl::WatchdogLoop() {
  SetCurrentThreadName("watch-" + options_.model_name);
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_stopping_) {
    const Clock::time_point now = clock_->Now();
    Clock::time_point wake = Clock::time_point::max();
    for (size_t i = 0; i < running_.size(); ++i) {
      RunningBatch& running = running_[i];
      if (!running.Watchable()) continue;
      const Clock::time_point dies_at = running.LastLiveDeadline();
      if (dies_at <= now) {
        running.terminated = true;
        instances_[i]->Terminate();  // thread-safe, returns at once
        continue;
      }
      wake = std::min(wake, dies_at);
    }
    watch_wake_at_ = wake;
    if (wake == Clock::time_point::max()) {
      watch_cv_.wait(lock);
    } else {
      clock_->WaitUntil(watch_cv_, lock, wake);
    }
    watch_wake_at_ = Clock::time_point::min();  // awake: Watch's batch is seen before it sleeps again
  }
}

void SchedulerImpl::RecordExecution(uint64_t ns) {
  uint64_t old = average_execution_ns_.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    next = old == 0 ? std::max<uint64_t>(ns, 1) : std::max<uint64_t>((old * 7 + ns) / 8, 1);
  } while (!average_execution_ns_.compare_exchange_weak(old, next, std::memory_order_relaxed));
}

void SchedulerImpl::ForecastAnswered(uint64_t answered) {
  if (!options_.adaptive_batch_window) return;
  std::unique_lock<std::mutex> lock = LockSoon(mu_);
  forecast_.Answered(answered, clock_->Now());
}

void SchedulerImpl::WorkerLoop(size_t index) {
  SetCurrentThreadName("run-" + options_.model_name);
  std::vector<QueuedRequest> batch;
  std::vector<RejectedRequest> rejected;
  for (;;) {
    batch.clear();
    rejected.clear();
    const bool keep_running = NextBatch(&batch, &rejected);
    for (RejectedRequest& r : rejected) {
      // The queue rejects only cancelled requests and expired timeouts.
      const RequestOutcome outcome = r.status.code() == StatusCode::kCancelled ? RequestOutcome::kCancelled
                                                                                : RequestOutcome::kTimeout;
      Fail(std::move(r.request), std::move(r.status), outcome);
    }
    if (!batch.empty()) Execute(index, batch);
    if (!keep_running) return;
  }
}

void SchedulerImpl::ResignLeader() {
  has_leader_ = false;
  if (!queue_.empty() || stopping_) follower_cv_.notify_one();
}

bool SchedulerImpl::NextBatch(std::vector<QueuedRequest>* batch,
                              std::vector<RejectedRequest>* rejected) {
  std::unique_lock<std::mutex> lock = LockSoon(mu_);
  if (stopping_) drained_cv_.notify_all();  // Shutdown may be waiting for the drain
  follower_cv_.wait(lock, [&] { return !has_leader_; });
  has_leader_ = true;
  for (;;) {
    const Clock::time_point now = clock_->Now();
    const Clock::time_point next_deadline = queue_.ApplyPolicies(now, rejected);
    if (!rejected->empty()) {
      // Answer them (outside the lock) before anything else waits.
      queue_depth_.store(queue_.size(), std::memory_order_relaxed);
      ResignLeader();
      return true;
    }
    if (queue_.empty()) {
      run_rest_now_ = false;
      if (stopping_) {
        ResignLeader();
        return false;
      }
      leader_cv_.wait(lock);
      continue;
    }
    // Adaptive window: with no arrival expected, waiting cannot grow the batch.
    const bool more_expected = !options_.adaptive_batch_window || forecast_.ExpectsMore(now);
    BatchPlan plan = assembler_.Plan(queue_, now, /*flush=*/stopping_ || !more_expected || run_rest_now_);
    if (!plan.members.empty()) {
      if (options_.adaptive_batch_window && more_expected && plan.window_over) {
        forecast_.WindowClosed();
      }
      if (balanced_runs_ > 1) {
        run_rest_now_ = KeepOwnShare(&plan.members);
        running_rows_.fetch_add(Rows(plan.members), std::memory_order_relaxed);
      }
      *batch = queue_.Take(plan.members);
      queue_depth_.store(queue_.size(), std::memory_order_relaxed);
      busy_instances_.fetch_add(1, std::memory_order_relaxed);
      ResignLeader();
      return true;
    }
    Clock::time_point wake_at = std::min(plan.wake_at, next_deadline);
    // Still expecting (else the plan went): re-plan when the expectation lapses.
    if (options_.adaptive_batch_window) wake_at = std::min(wake_at, forecast_.ExpectUntil());
    if (wake_at == Clock::time_point::max()) {
      leader_cv_.wait(lock);
    } else {
      clock_->WaitUntil(leader_cv_, lock, wake_at);
    }
  }
}

bool SchedulerImpl::KeepOwnShare(std::vector<QueuedRequest*>* members) const {
  if (members->size() < 2) return false;
  // The work in hand: the rows planned and those the other instances run.
  const uint64_t rows = running_rows_.load(std::memory_order_relaxed) + Rows(*members);
  const uint64_t share = (rows + balanced_runs_ - 1) / balanced_runs_;
  // Whole requests, in the plan's order; at least one.
  size_t keep = 1;
  uint64_t taken = (*members)[0]->batch_size;
  while (keep < members->size() && taken + (*members)[keep]->batch_size <= share) {
    taken += (*members)[keep++]->batch_size;
  }
  if (keep == members->size()) return false;  // e.g. requests with 0 rows
  members->resize(keep);
  return true;
}

void SchedulerImpl::EndRun(uint64_t rows) {
  busy_instances_.fetch_sub(1, std::memory_order_relaxed);
  if (balanced_runs_ > 1) running_rows_.fetch_sub(rows, std::memory_order_relaxed);
}

void SchedulerImpl::Execute(size_t index, std::vector<QueuedRequest>& batch) {
  ModelInstance& instance = *instances_[index];
  // Waiting for a compute slot counts as queue time: the batch has not started.
  std::optional<ComputeSlots::Lease> lease;
  if (options_.compute_slots) lease.emplace(options_.compute_slots->Acquire(options_.compute_slots_per_run));
  const Clock::time_point start = clock_->Now();

  std::vector<const InferenceRequest*> requests;
  std::vector<uint64_t> rows;
  uint64_t batch_size = 0;
  for (const QueuedRequest& entry : batch) {
    requests.push_back(entry.request.get());
    rows.push_back(entry.batch_size);
    batch_size += entry.batch_size;
  }

  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::vector<std::vector<Tensor>> per_request;
  Clock::time_point input_end = start, infer_end = start;
  Status status;
  RunEnd run_end = RunEnd::kRan;
  try {
    status = stackers_[index].Stack(requests, &inputs);
    input_end = clock_->Now();
    if (status.ok()) {
      try {
        if (Watch(index, batch)) status = instance.Run(inputs, &outputs);
      } catch (...) {
        run_end = Unwatch(index);
        throw;
      }
      run_end = Unwatch(index);
      if (!status.ok()) status = Internal(status.message());
    }
    infer_end = clock_->Now();
    lease.reset();   // splitting and answering need no compute slot
    inputs.clear();  // lets the stacker reuse its buffers
    if (status.ok() && outputs.size() != instance.OutputNames().size()) {
      status = Internal(label_ + " returned " + std::to_string(outputs.size()) +
                        " outputs, expected " + std::to_string(instance.OutputNames().size()));
    }
    if (status.ok()) {
      if (batch.size() == 1 && options_.max_batch_size == 0) {
        per_request.push_back(std::move(outputs));  // tensors as the model made them
      } else {
        status = TensorStacker::Split(outputs, rows, &per_request);
      }
    }
  } catch (const std::exception& e) {
    status = Internal(label_ + ": " + e.what());
  } catch (...) {
    status = Internal(label_ + ": unknown exception while running a batch");
  }

  // Before any answer leaves: a client answered may send its next request
  // before this worker gets back to the queue.
  ForecastAnswered(batch.size());
  if (run_end != RunEnd::kRan) {
    // Whatever Run returned (if it started): every request was dead when it
    // was stopped, or shutdown's deadline had passed.
    lease.reset();
    stats_->terminated_executions.fetch_add(1, std::memory_order_relaxed);
    EndRun(batch_size);
    for (QueuedRequest& entry : batch) {
      const std::string id = entry.request->id;
      if (run_end == RunEnd::kAbandoned) {
        Fail(std::move(entry.request),
             Unavailable(label_ + " is shutting down: the run of request '" + id +
                         "' was stopped at the exit timeout"),
             RequestOutcome::kRejected);
      } else if (entry.request->cancelled && entry.request->cancelled->IsCancelled()) {
        Fail(std::move(entry.request),
             {StatusCode::kCancelled,
              "request '" + id + "' for " + label_ + " was cancelled; its run was terminated"},
             RequestOutcome::kCancelled);
      } else {
        Fail(std::move(entry.request),
             Unavailable("Request timeout expired (" + label_ + ", request '" + id +
                         "'); its run was terminated"),
             RequestOutcome::kTimeout);
      }
    }
    return;
  }
  if (!status.ok()) {
    EndRun(batch_size);
    for (QueuedRequest& entry : batch) Fail(std::move(entry.request), status, RequestOutcome::kInternal);
    return;
  }

  std::vector<Result<InferenceResponse>> responses;
  responses.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    responses.push_back(BuildResponse(*batch[i].request, std::move(per_request[i])));
  const Clock::time_point end = clock_->Now();
  // Tracing: the batch's times and span links go into its traced requests'
  // records before anyone is answered (a null check per request otherwise).
  RecordBatchTrace(batch, start, end, batch_size);

  RecordExecution(Nanos(start, end));
  const uint64_t input_ns = Nanos(start, input_end);
  const uint64_t infer_ns = Nanos(input_end, infer_end);
  const uint64_t output_ns = Nanos(infer_end, end);
  if (BatchStat* per_size = stats_->ForBatchSize(batch_size)) {
    per_size->compute_input.Add(input_ns);
    per_size->compute_infer.Add(infer_ns);
    per_size->compute_output.Add(output_ns);
  }
  stats_->inference_count.fetch_add(batch_size, std::memory_order_relaxed);
  stats_->execution_count.fetch_add(1, std::memory_order_relaxed);
  stats_->last_inference_ms.store(WallClockMs(), std::memory_order_relaxed);
  stats_->batch_size.Observe(batch_size);
  EndRun(batch_size);

  // Triton counts the batch's compute durations once per successful request;
  // one atomic add per counter for the whole batch says the same. Recorded
  // before any caller is answered, so statistics never lag a response.
  const uint64_t succeeded = static_cast<uint64_t>(
      std::count_if(responses.begin(), responses.end(), [](const auto& r) { return r.ok(); }));
  if (succeeded > 0) {
    stats_->compute_input.Add(input_ns * succeeded, succeeded);
    stats_->compute_infer.Add(infer_ns * succeeded, succeeded);
    stats_->compute_output.Add(output_ns * succeeded, succeeded);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    InferenceRequest& request = *batch[i].request;
    if (!responses[i].ok()) {
      Fail(std::move(batch[i].request), responses[i].status(), RequestOutcome::kInvalidInput);
      continue;
    }
    const Clock::time_point arrival = std::min(request.arrival_time, batch[i].enqueue_time);
    const uint64_t request_ns = Nanos(arrival, end);
    const uint64_t queue_ns = Nanos(batch[i].enqueue_time, start);
    stats_->success.Add(request_ns);
    stats_->queue.Add(queue_ns);
    stats_->CountOutcome(RequestOutcome::kSuccess);
    stats_->request_duration.Observe(request_ns);
    stats_->queue_duration.Observe(queue_ns);
    stats_->compute_input_duration.Observe(input_ns);
    stats_->compute_infer_duration.Observe(infer_ns);
    stats_->compute_output_duration.Observe(output_ns);
    responses[i].value().queue_ns = queue_ns;
    responses[i].value().compute_ns = input_ns + infer_ns + output_ns;
    responses[i].value().batch_size = batch_size;
    Complete(request, std::move(responses[i]));
  }
}

Result<InferenceResponse> SchedulerImpl::BuildResponse(InferenceRequest& request,
                                                       std::vector<Tensor> outputs) const {
  InferenceResponse response;
  response.model_name = options_.model_name;
  response.model_version = options_.model_version;
  response.id = request.id;
  const std::vector<std::string>& names = instances_.front()->OutputNames();
  if (request.requested_outputs.empty()) {
    response.outputs = std::move(outputs);
    for (size_t j = 0; j < response.outputs.size(); ++j) {
      response.outputs[j].name = names[j];
      response.requested.push_back({names[j], false});
    }
    return response;
  }
  for (const RequestedOutput& wanted : request.requested_outputs) {
    auto it = std::find(names.begin(), names.end(), wanted.name);
    if (it == names.end()) {
      return InvalidArgument(label_ + " has no output named '" + wanted.name + "'");
    }
    Tensor tensor = outputs[static_cast<size_t>(it - names.begin())];  // shares the buffer
    tensor.name = wanted.name;
    response.outputs.push_back(std::move(tensor));
    response.requested.push_back(wanted);
  }
  return response;
}

void SchedulerImpl::Fail(std::unique_ptr<InferenceRequest> request, Status status,
                         RequestOutcome outcome) {
  stats_->fail.Add(Nanos(request->arrival_time, clock_->Now()));
  stats_->CountOutcome(outcome);
  Complete(*request, std::move(status));
}

void SchedulerImpl::Complete(InferenceRequest& request, Result<InferenceResponse> result) {
  if (request.on_complete) request.on_complete(std::move(result));
}

}  // namespace ortserve

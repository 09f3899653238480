#include "scheduler/SequenceBatcher.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "core/ThreadName.h"
#include "scheduler/SchedulerParts.h"
#include "scheduler/TensorStacker.h"

namespace ortserve {
namespace {

using Strategy = SequencePolicy::Strategy;

// How the slot count came about, for the message of a START finding none.
std::string DescribeSlots(const SequenceBatcherOptions& o, size_t instances) {
  const std::string per = o.sequence.strategy == Strategy::kOldest
                              ? "max_candidate_sequences " + std::to_string(o.sequence.slots_per_instance)
                              : "max_batch_size " + std::to_string(o.sequence.slots_per_instance);
  return std::to_string(instances) + " instance(s) x " + per;
}

// The request's rows: dim 0 of its first input (1 without a batch dim).
int64_t RowsOf(const InferenceRequest& request, bool batching) {
  if (!batching || request.inputs.empty() || request.inputs[0].shape.empty()) return 1;
  return request.inputs[0].shape[0];
}

}  // namespace

void SequenceBatcher::Work::Clear() {
  batch.clear();
  padding.clear();
  rejected.clear();
  dropped.clear();
}

Result<std::unique_ptr<SequenceBatcher>> SequenceBatcher::Create(
    SequenceBatcherOptions options, std::vector<std::unique_ptr<ModelInstance>> instances, ModelStatistics* stats,
    RequestCompleter* completer, std::shared_ptr<SchedulerClock> clock) {
  ORTSERVE_RETURN_IF_ERROR(CheckSchedulerParts(options.Label(), instances, stats, completer));
  ORTSERVE_RETURN_IF_ERROR(options.Validate());
  if (!clock) clock = std::make_shared<SteadySchedulerClock>();
  return std::unique_ptr<SequenceBatcher>(
      new SequenceBatcher(std::move(options), std::move(instances), stats, completer, std::move(clock)));
}

SequenceBatcher::SequenceBatcher(SequenceBatcherOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
                                 ModelStatistics* stats, RequestCompleter* completer,
                                 std::shared_ptr<SchedulerClock> clock)
    : options_(std::move(options)),
      label_(options_.Label()),
      instances_(std::move(instances)),
      clock_(std::move(clock)),
      answerer_(label_, stats, completer, clock_.get()),
      controls_(options_.sequence, options_.batcher.batching.max_batch_size > 0),
      balancer_(ComputePolicy{}, instances_.size()),
      watchdog_(options_.batcher.model_name, InstancePointers(instances_), clock_.get()),
      runs_(instances_.size()),
      wake_(instances_.size()),
      table_(options_.batcher.model_name, static_cast<uint32_t>(instances_.size()),
             options_.sequence.slots_per_instance, options_.sequence.running_start,
             options_.sequence.max_sequence_idle_us, DescribeSlots(options_, instances_.size()), &stats->sequences),
      heads_(instances_.size()),
      freed_(instances_.size()) {
  const uint32_t slots = options_.sequence.slots_per_instance;
  const bool batching = options_.batcher.batching.max_batch_size > 0;
  const QueuePolicy policy = options_.batcher.queueing.default_policy;
  {
    MutexLock lock(mu_);  // nothing else runs yet; the analysis wants it for the guarded members
    for (size_t i = 0; i < instances_.size(); ++i) {
      runners_.emplace_back(i, instances_[i].get(), &options_.batcher, &watchdog_, clock_.get());
      states_.push_back(
          std::make_unique<SequenceStates>(options_.sequence, batching, slots, &stats->sequences.state_bytes));
      queues_.emplace_back(label_, std::vector<QueuePolicy>{policy}, options_.batcher.queueing.default_max_queue_size);
      planners_.emplace_back(options_.batcher.batching, 1, &balancer_);
    }
  }
  workers_.reserve(instances_.size());
  for (uint32_t i = 0; i < instances_.size(); ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

SequenceBatcher::~SequenceBatcher() { Shutdown(); }

void SequenceBatcher::Submit(std::unique_ptr<InferenceRequest> request) {
  (void)Enqueue(request, /*keep_when_full=*/false);
}

Status SequenceBatcher::TrySubmit(std::unique_ptr<InferenceRequest>& request) {
  return Enqueue(request, /*keep_when_full=*/true);
}

Status SequenceBatcher::CheckRequest(const InferenceRequest& request) const {
  const std::string& model = options_.batcher.model_name;
  const int64_t rows = RowsOf(request, options_.batcher.batching.max_batch_size > 0);
  if (rows != 1) {
    return InvalidArgument("inference request to model '" + model +
                           "' must specify batch-size 1 due to requirements of sequence batcher: request '" +
                           request.id + "' has batch size " + std::to_string(rows) +
                           " (a sequence sends one row per request)");
  }
  if (!request.sequence.has_id()) return Status::Ok();  // the table says why it needs one
  return controls_.CheckCorrelationId(request.sequence, model);
}

Status SequenceBatcher::Enqueue(std::unique_ptr<InferenceRequest>& request, bool keep_when_full) {
  if (!request) return Status::Ok();
  if (Status refused = CheckRequest(*request); !refused.ok()) {
    answerer_.Fail(std::move(request), std::move(refused), RequestOutcome::kInvalidInput);
    return Status::Ok();
  }
  Status status;
  bool full = false;
  uint32_t instance = 0;
  {
    MutexLock lock(mu_, MutexLock::kSpinFirst);
    status = stopping_ ? Unavailable(label_ + " is shutting down") : Route(request, &instance, &full);
  }
  if (full && keep_when_full) return status;
  if (!status.ok()) {
    const RequestOutcome outcome = OutcomeOfFailure(status);  // invalid_input, or rejected (no room)
    answerer_.Fail(std::move(request), std::move(status), outcome);
    return Status::Ok();
  }
  // After unlocking: the worker re-checks its queue under mu_, which already
  // holds this request, so no wake-up is lost.
  wake_[instance].notify_one();
  return Status::Ok();
}

Status SequenceBatcher::Route(std::unique_ptr<InferenceRequest>& request, uint32_t* instance, bool* full) {
  auto route = table_.Find(*request);
  if (!route.ok()) {
    *full = route.status().code() == StatusCode::kUnavailable;
    return route.status();
  }
  const SlotRef where = route->where;
  const SequenceParameters sequence = request->sequence;  // the queue takes the request
  const Clock::time_point now = clock_->Now();
  Status pushed = queues_[where.instance].Push(request, 1, 1, now, where.slot);
  if (!pushed.ok()) {
    *full = true;
    return pushed;
  }
  table_.Accept(route.value(), sequence);
  planners_[where.instance].Arrived(now);
  UpdateQueueDepth();
  *instance = where.instance;
  return Status::Ok();
}

void SequenceBatcher::UpdateQueueDepth() {
  size_t depth = 0;
  for (const RequestQueue& q : queues_) depth += q.size();
  queue_depth_.store(depth, std::memory_order_relaxed);
}

void SequenceBatcher::WorkerLoop(uint32_t instance) {
  SetCurrentThreadName("run-" + options_.batcher.model_name);
  Work work;
  for (;;) {
    work.Clear();
    const bool keep_running = NextBatch(instance, &work);
    answerer_.Reject(work.rejected);
    for (RejectedRequest& r : work.dropped) answerer_.Fail(std::move(r.request), r.status, RequestOutcome::kRejected);
    if (!work.batch.empty()) Execute(instance, work);
    if (!keep_running) return;
  }
}

bool SequenceBatcher::NextBatch(uint32_t instance, Work* work) {
  MutexLock lock(mu_, MutexLock::kSpinFirst);
  if (stopping_) drained_cv_.notify_all();  // Shutdown may be waiting for the drain
  RequestQueue& queue = queues_[instance];
  for (;;) {
    const Clock::time_point now = clock_->Now();
    const Clock::time_point next_deadline = queue.ApplyPolicies(now, &work->rejected);
    if (!work->rejected.empty()) {
      EndRejected(instance, work);
      UpdateQueueDepth();
      return true;  // answered (outside the lock) before anything else waits
    }
    const Clock::time_point next_idle = ExpireIdle(instance, now);
    Clock::time_point wake_at = next_idle;
    if (queue.empty()) {
      planners_[instance].QueueEmptied();
      if (stopping_) return false;
    } else {
      Clock::time_point plan_wake = Clock::time_point::max();
      const bool planned = options_.sequence.strategy == Strategy::kOldest
                               ? PlanOldest(instance, now, work, &plan_wake)
                               : PlanDirect(instance, now, work, &plan_wake);
      if (planned) return true;
      wake_at = std::min({wake_at, plan_wake, next_deadline});
    }
    if (wake_at == Clock::time_point::max()) {
      lock.Wait(wake_[instance]);
    } else {
      clock_->WaitUntil(wake_[instance], lock.native(), wake_at);
    }
  }
}

std::vector<QueuedRequest*>& SequenceBatcher::Heads(uint32_t instance,
                                                    std::vector<QueuedRequest*>* in_arrival_order) {
  std::vector<QueuedRequest*>& heads = heads_[instance];
  heads.assign(options_.sequence.slots_per_instance, nullptr);
  queues_[instance].Scan([&](QueuedRequest& entry) {
    if (heads[entry.slot] != nullptr) return true;
    heads[entry.slot] = &entry;
    if (in_arrival_order) in_arrival_order->push_back(&entry);
    return true;
  });
  return heads;
}

bool SequenceBatcher::PlanDirect(uint32_t instance, Clock::time_point now, Work* work, Clock::time_point* wake_at) {
  // Row r is slot r: the rows go up to the highest slot with a request that
  // stacks with the lowest one's; the others are padding.
  std::vector<QueuedRequest*>& rows = Heads(instance);
  const QueuedRequest* first = nullptr;
  size_t ready = 0;
  size_t count = 0;
  Clock::time_point earliest = Clock::time_point::max();
  for (size_t s = 0; s < rows.size(); ++s) {
    if (rows[s] == nullptr) continue;
    if (first == nullptr) {
      first = rows[s];  // always runs (a scalar input never "stacks", even with itself)
    } else if (!CanStack(*first->request, *rows[s]->request)) {
      rows[s] = nullptr;  // waits for a later batch
      continue;
    }
    ++ready;
    count = s + 1;
    earliest = std::min(earliest, rows[s]->enqueue_time);
  }
  const BatchingPolicy& batching = options_.batcher.batching;
  const float utilization = options_.sequence.minimum_slot_utilization;
  const auto delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::microseconds(std::min<uint64_t>(batching.max_queue_delay_us, 3600'000'000ULL)));
  const bool wait = !stopping_ && delay > Clock::duration::zero() && utilization > 0.0f &&
                    static_cast<float>(ready) < utilization * static_cast<float>(std::max(1, batching.max_batch_size)) &&
                    now < earliest + delay;
  if (wait) {
    *wake_at = earliest + delay;
    return false;
  }
  rows.resize(count);
  TakeBatch(instance, rows, now, work);
  return true;
}

bool SequenceBatcher::PlanOldest(uint32_t instance, Clock::time_point now, Work* work, Clock::time_point* wake_at) {
  // The candidates: each sequence's oldest request, oldest first (the queue
  // is in arrival order).
  std::vector<QueuedRequest*> candidates;
  Heads(instance, &candidates);
  BatchPlan plan = planners_[instance].Plan(candidates, now, stopping_);
  if (plan.members.empty()) {
    *wake_at = plan.wake_at;
    return false;
  }
  TakeBatch(instance, plan.members, now, work);
  return true;
}

void SequenceBatcher::TakeBatch(uint32_t instance, const std::vector<QueuedRequest*>& members, Clock::time_point now,
                                Work* work) {
  std::vector<QueuedRequest*> real;
  for (QueuedRequest* m : members)
    if (m != nullptr) real.push_back(m);
  std::vector<QueuedRequest> taken = queues_[instance].Take(real);
  size_t next = 0;
  for (size_t r = 0; r < members.size(); ++r) {
    const bool pad = members[r] == nullptr;
    work->padding.push_back(pad);
    if (!pad) {
      table_.Dequeued({instance, taken[next].slot}, /*into_batch=*/true);
      work->batch.push_back(std::move(taken[next++]));
      continue;
    }
    QueuedRequest padding;  // filled by AddSequenceInputs, outside the lock
    padding.enqueue_time = now;
    padding.deadline = Clock::time_point::min();  // never keeps a batch alive (RunWatchdog)
    padding.slot = static_cast<uint32_t>(r);
    work->batch.push_back(std::move(padding));
  }
  UpdateQueueDepth();
  busy_instances_.fetch_add(1, std::memory_order_relaxed);
}

void SequenceBatcher::EndRejected(uint32_t instance, Work* work) {
  for (const RejectedRequest& r : work->rejected) {
    const SlotRef slot{instance, r.slot};
    table_.Dequeued(slot, /*into_batch=*/false);
    EndSequence(slot, "its request '" + r.request->id + "' failed: " + r.status.message(), &work->dropped);
  }
}

void SequenceBatcher::EndSequence(SlotRef slot, const std::string& why, std::vector<RejectedRequest>* dropped) {
  const std::string key = table_.KeyOf(slot).ToString();
  const bool live = table_.Live(slot);
  std::vector<QueuedRequest*> left;
  queues_[slot.instance].Scan([&](QueuedRequest& entry) {
    if (entry.slot == slot.slot) left.push_back(&entry);
    return true;
  });
  for (QueuedRequest& entry : queues_[slot.instance].Take(left)) {
    table_.Dequeued(slot, /*into_batch=*/false);
    dropped->push_back({std::move(entry.request),
                        Unavailable(table_.Prefix(table_.KeyOf(slot)) + " was not run: sequence " + key +
                                    " was ended because " + why),
                        slot.slot});
  }
  if (live) spdlog::debug("{}: sequence {} ended because {}", label_, key, why);
  if (table_.EndEarly(slot, SequenceEnd::kFailed, "sequence " + key + " was ended because " + why)) {
    states_[slot.instance]->Release(slot.slot);
  }
}

Clock::time_point SequenceBatcher::ExpireIdle(uint32_t instance, Clock::time_point now) {
  std::vector<uint32_t>& freed = freed_[instance];
  freed.clear();
  const Clock::time_point next = table_.ExpireIdle(instance, now, &freed);
  for (uint32_t slot : freed) states_[instance]->Release(slot);
  return next;
}

void SequenceBatcher::AddSequenceInputs(uint32_t instance, Work& work) const {
  // A padding row copies a real row's own inputs (sharing their data), taken
  // before any row gets its control and state inputs.
  const InferenceRequest* like = nullptr;
  for (const QueuedRequest& entry : work.batch)
    if (entry.request) like = like ? like : entry.request.get();
  const bool padded = std::find(work.padding.begin(), work.padding.end(), true) != work.padding.end();
  const std::vector<Tensor> padding_inputs = padded ? like->inputs : std::vector<Tensor>{};
  const SequenceStates& states = *states_[instance];
  for (size_t r = 0; r < work.batch.size(); ++r) {
    QueuedRequest& entry = work.batch[r];
    if (work.padding[r]) {
      auto padding = std::make_unique<InferenceRequest>();
      padding->model_name = like->model_name;
      padding->inputs = padding_inputs;  // READY false says to ignore them
      controls_.Append({.start = false, .end = false, .ready = false}, SequenceParameters{}, &padding->inputs);
      states.AppendInitial(&padding->inputs);
      entry.request = std::move(padding);
      continue;
    }
    InferenceRequest& request = *entry.request;
    const SequenceParameters& s = request.sequence;
    controls_.Append({.start = s.start, .end = s.end, .ready = true}, s, &request.inputs);
    states.Append(entry.slot, s.start, &request.inputs);
  }
}

void SequenceBatcher::Execute(uint32_t instance, Work& work) {
  AddSequenceInputs(instance, work);
  BatchRun& run = runs_[instance];
  runners_[instance].Run(work.batch, &run);
  // Padding rows are not answered, but count in the batch size (Triton's
  // statistics count the rows that ran).
  for (size_t r = work.batch.size(); r-- > 0;) {
    if (!work.padding[r]) continue;
    work.batch.erase(work.batch.begin() + static_cast<std::ptrdiff_t>(r));
    if (r < run.responses.size()) run.responses.erase(run.responses.begin() + static_cast<std::ptrdiff_t>(r));
  }
  std::vector<RejectedRequest> failed;
  if (run.ending == RunWatchdog::RunEnd::kRan && run.status.ok()) KeepStates(instance, work, run, &failed);
  Settle(instance, work, run, failed);
  busy_instances_.fetch_sub(1, std::memory_order_relaxed);
  for (RejectedRequest& r : failed) answerer_.Fail(std::move(r.request), r.status, RequestOutcome::kInternal);
  for (RejectedRequest& r : work.dropped) answerer_.Fail(std::move(r.request), r.status, RequestOutcome::kRejected);
  work.dropped.clear();
  if (!work.batch.empty()) answerer_.Answer(work.batch, run);
}

void SequenceBatcher::KeepStates(uint32_t instance, Work& work, BatchRun& run, std::vector<RejectedRequest>* failed) {
  SequenceStates& states = *states_[instance];
  if (states.empty()) return;
  for (size_t r = work.batch.size(); r-- > 0;) {
    QueuedRequest& entry = work.batch[r];
    Status kept = states.Keep(entry.slot, run.responses[r].outputs);
    if (kept.ok()) continue;
    failed->push_back({std::move(entry.request), Internal(label_ + ": " + kept.message()), entry.slot});
    work.batch.erase(work.batch.begin() + static_cast<std::ptrdiff_t>(r));
    run.responses.erase(run.responses.begin() + static_cast<std::ptrdiff_t>(r));
  }
}

void SequenceBatcher::Settle(uint32_t instance, Work& work, const BatchRun& run,
                             std::vector<RejectedRequest>& failed) {
  const bool ran = run.ending == RunWatchdog::RunEnd::kRan && run.status.ok();
  std::string why;
  if (run.ending == RunWatchdog::RunEnd::kDead) {
    why = "its run was terminated (every request of the batch had timed out or been cancelled)";
  } else if (run.ending == RunWatchdog::RunEnd::kAbandoned) {
    why = "its run was stopped at the exit timeout";
  } else if (!run.status.ok()) {
    why = "its run failed: " + run.status.message();
  }
  MutexLock lock(mu_, MutexLock::kSpinFirst);
  const Clock::time_point now = clock_->Now();
  for (const QueuedRequest& entry : work.batch) {
    const SlotRef slot{instance, entry.slot};
    if (!ran) EndSequence(slot, "its request '" + entry.request->id + "' failed: " + why, &work.dropped);
    if (table_.RunEnded(slot, now)) states_[instance]->Release(entry.slot);
  }
  for (const RejectedRequest& r : failed) {
    const SlotRef slot{instance, r.slot};
    EndSequence(slot, "its request '" + r.request->id + "' failed: " + r.status.message(), &work.dropped);
    if (table_.RunEnded(slot, now)) states_[instance]->Release(r.slot);
  }
  // Before any answer leaves: a client answered may send its next request
  // before this worker is back at the queue.
  planners_[instance].Answered(work.batch.size() + failed.size(), now);
}

void SequenceBatcher::Shutdown(Clock::time_point abandon_at) {
  MutexLock shutdown_lock(shutdown_mu_);
  bool drained;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    for (std::condition_variable& cv : wake_) cv.notify_all();
    // Workers notify drained_cv_ under mu_ each time they come back for work
    // while stopping, so this re-check cannot miss the last one.
    for (;;) {
      drained = queue_depth_.load() == 0 && busy_instances_.load() == 0;
      if (drained || abandon_at == Clock::time_point::max() || clock_->Now() >= abandon_at) break;
      clock_->WaitUntil(drained_cv_, lock.native(), abandon_at);
    }
  }
  if (!drained && abandon_at != Clock::time_point::max()) Abandon();
  for (std::thread& worker : workers_)
    if (worker.joinable()) worker.join();
  watchdog_.Stop();
  MutexLock lock(mu_);
  if (const size_t open = table_.live(); open > 0) {
    spdlog::info("{}: {} open sequence(s) dropped at shutdown, with their state", label_, open);
  }
  table_.DropAll();
  // The workers are gone: the states are no one's now.
  for (const auto& states : states_) states->ReleaseAll();
}

void SequenceBatcher::Abandon() {
  std::vector<QueuedRequest> left;
  {
    MutexLock lock(mu_);
    for (RequestQueue& queue : queues_) {
      std::vector<QueuedRequest*> all;
      queue.Scan([&](QueuedRequest& entry) {
        all.push_back(&entry);
        return true;
      });
      for (QueuedRequest& entry : queue.Take(all)) left.push_back(std::move(entry));
    }
    UpdateQueueDepth();
  }
  watchdog_.Abandon();
  answerer_.AnswerAbandoned(left);
}

}  // namespace ortserve

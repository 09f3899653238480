#include "scheduler/BatchAssembler.h"

#include <algorithm>
#include <chrono>

#include "scheduler/TensorStacker.h"

namespace ortserve {

BatchAssembler::BatchAssembler(const BatchingPolicy& policy)
    : batching_(policy.max_batch_size > 0 && policy.dynamic_batching),
      group_by_shape_(policy.group_by_shape),
      ragged_(policy.ragged),
      max_batch_size_(policy.max_batch_size > 0 ? static_cast<uint64_t>(policy.max_batch_size) : 1),
      // Capped at an hour so that enqueue_time + delay cannot overflow.
      max_queue_delay_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::microseconds(std::min<uint64_t>(policy.max_queue_delay_us, 3600'000'000ULL)))) {
  for (int size : policy.preferred_batch_sizes) preferred_.push_back(static_cast<uint64_t>(size));
  std::sort(preferred_.begin(), preferred_.end());
  preferred_.erase(std::unique(preferred_.begin(), preferred_.end()), preferred_.end());
  target_size_ = preferred_.empty() ? max_batch_size_ : preferred_.back();
}

bool BatchAssembler::IsPreferred(uint64_t size) const {
  return std::binary_search(preferred_.begin(), preferred_.end(), size);
}

void BatchAssembler::Start(Draft& draft, QueuedRequest& head) const {
  draft.members.push_back(&head);
  draft.total = head.batch_size;
  if (IsPreferred(draft.total)) draft.preferred_count = 1;
}

bool BatchAssembler::Fits(const Draft& draft, const QueuedRequest& entry) const {
  return draft.total + entry.batch_size <= max_batch_size_;
}

void BatchAssembler::Add(Draft& draft, QueuedRequest& entry) const {
  const uint64_t grown = draft.total + entry.batch_size;
  if (!preferred_.empty() && draft.preferred_count == 0 && grown > target_size_) {
    draft.preferred_count = draft.members.size();  // waiting cannot reach a preferred size
  }
  draft.members.push_back(&entry);
  draft.total = grown;
  if (IsPreferred(draft.total)) draft.preferred_count = draft.members.size();
}

BatchPlan BatchAssembler::Settle(Draft& draft, Clock::time_point now) const {
  BatchPlan plan;
  const Clock::time_point window_end = draft.members.front()->enqueue_time + max_queue_delay_;
  const bool window_over = max_queue_delay_ != Clock::duration::zero() && now >= window_end;
  plan.window_over = window_over;
  if (draft.preferred_count > 0 && !window_over && !draft.flush) {
    draft.members.resize(draft.preferred_count);
    plan.members = std::move(draft.members);
    return plan;
  }
  if (draft.flush || draft.saturated || draft.total >= target_size_ || window_over ||
      max_queue_delay_ == Clock::duration::zero()) {
    plan.members = std::move(draft.members);
    return plan;
  }
  plan.wake_at = window_end;
  return plan;
}

template <typename Scan>
BatchPlan BatchAssembler::PlanScan(Scan&& scan, Clock::time_point now, PlanUrgency urgency) const {
  if (!batching_) {
    BatchPlan plan;
    scan([&](QueuedRequest& entry) {
      plan.members.push_back(&entry);
      return false;
    });
    return plan;
  }
  if (group_by_shape_) return PlanGroups(scan, now, urgency);

  Draft draft;
  draft.flush = urgency.flush || urgency.ready != nullptr;
  scan([&](QueuedRequest& entry) {
    if (draft.members.empty()) {
      Start(draft, entry);
      return !Full(draft);
    }
    // A request that cannot join releases the batch at once, as Triton's: the
    // instance has other work waiting. It also ends the batch (batches are
    // runs of consecutive requests, so no request is overtaken by a later one
    // that happens to fit).
    if (!Fits(draft, entry) || !CanStack(*draft.members.front()->request, *entry.request, ragged_.get())) {
      draft.saturated = true;
      return false;
    }
    Add(draft, entry);
    return !Full(draft);
  });
  return Settle(draft, now);
}

template <typename Scan>
BatchPlan BatchAssembler::PlanGroups(Scan&& scan, Clock::time_point now, PlanUrgency urgency) const {
  std::vector<Draft> groups;  // in the order of their heads: the oldest first
  scan([&](QueuedRequest& entry) {
    auto group = std::find_if(groups.begin(), groups.end(), [&](const Draft& g) {
      return CanStack(*g.members.front()->request, *entry.request, ragged_.get());
    });
    if (group == groups.end()) {
      if (groups.size() == kMaxShapeGroups) return true;
      groups.emplace_back();
      group = groups.end() - 1;
      Start(*group, entry);
    } else if (group->saturated || Full(*group)) {
      return true;  // waits for the next batch of its group
    } else if (!Fits(*group, entry)) {
      // Its own queue's next request cannot join: Triton's rule within the
      // group releases the batch, and the request heads the group's next one.
      group->saturated = true;
    } else {
      Add(*group, entry);
    }
    if (entry.request.get() == urgency.ready) group->flush = true;
    // The oldest group goes as soon as it cannot grow: nothing later matters.
    const Draft& oldest = groups.front();
    return !oldest.saturated && !Full(oldest);
  });

  BatchPlan waiting;
  for (Draft& group : groups) {
    group.flush = group.flush || urgency.flush;
    BatchPlan plan = Settle(group, now);
    if (!plan.members.empty()) return plan;
    waiting.wake_at = std::min(waiting.wake_at, plan.wake_at);
  }
  return waiting;
}

BatchPlan BatchAssembler::Plan(RequestQueue& queue, Clock::time_point now, PlanUrgency urgency) const {
  if (queue.empty()) return {};
  return PlanScan([&queue](auto&& visit) { queue.Scan(visit); }, now, urgency);
}

BatchPlan BatchAssembler::Plan(const std::vector<QueuedRequest*>& candidates, Clock::time_point now,
                               PlanUrgency urgency) const {
  if (candidates.empty()) return {};
  return PlanScan(
      [&candidates](auto&& visit) {
        for (QueuedRequest* entry : candidates)
          if (!visit(*entry)) return;
      },
      now, urgency);
}

}  // namespace ortserve

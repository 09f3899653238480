#include "scheduler/BatchAssembler.h"

#include <algorithm>
#include <chrono>

#include "scheduler/TensorStacker.h"

namespace ortserve {

BatchAssembler::BatchAssembler(const BatchingPolicy& policy)
    : batching_(policy.max_batch_size > 0 && policy.dynamic_batching),
      group_by_shape_(policy.group_by_shape),
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

template <typename Scan>
BatchPlan BatchAssembler::PlanScan(Scan&& scan, Clock::time_point now, bool flush) const {
  BatchPlan plan;
  if (!batching_) {
    scan([&](QueuedRequest& entry) {
      plan.members.push_back(&entry);
      return false;
    });
    return plan;
  }

  uint64_t total = 0;
  size_t preferred_count = 0;  // members prefix worth sending now; 0: none
  bool saturated = false;      // a queued request cannot join: send now
  scan([&](QueuedRequest& entry) {
    if (plan.members.empty()) {
      plan.members.push_back(&entry);
      total = entry.batch_size;
      if (IsPreferred(total)) preferred_count = 1;
      return total < max_batch_size_;
    }
    // A request that cannot join releases the batch at once, as Triton's: the
    // instance has other work waiting. By default it also ends the batch
    // (batches are runs of consecutive requests, so no request is overtaken
    // by a later one that happens to fit); grouped by shape, it is passed over.
    const uint64_t grown = total + entry.batch_size;
    if (grown > max_batch_size_ || !CanStack(*plan.members.front()->request, *entry.request)) {
      saturated = true;
      return group_by_shape_;
    }
    if (!preferred_.empty() && preferred_count == 0 && grown > target_size_) {
      preferred_count = plan.members.size();  // waiting cannot reach a preferred size
    }
    plan.members.push_back(&entry);
    total = grown;
    if (IsPreferred(total)) preferred_count = plan.members.size();
    return total < max_batch_size_;
  });

  const Clock::time_point window_end = plan.members.front()->enqueue_time + max_queue_delay_;
  const bool window_over = max_queue_delay_ != Clock::duration::zero() && now >= window_end;
  plan.window_over = window_over;
  if (preferred_count > 0 && !window_over && !flush) {
    plan.members.resize(preferred_count);
    return plan;
  }
  if (flush || saturated || total >= target_size_ || window_over ||
      max_queue_delay_ == Clock::duration::zero()) {
    return plan;
  }
  plan.members.clear();
  plan.wake_at = window_end;
  return plan;
}

BatchPlan BatchAssembler::Plan(RequestQueue& queue, Clock::time_point now, bool flush) const {
  if (queue.empty()) return {};
  return PlanScan([&queue](auto&& visit) { queue.Scan(visit); }, now, flush);
}

BatchPlan BatchAssembler::Plan(const std::vector<QueuedRequest*>& candidates, Clock::time_point now,
                               bool flush) const {
  if (candidates.empty()) return {};
  return PlanScan(
      [&candidates](auto&& visit) {
        for (QueuedRequest* entry : candidates)
          if (!visit(*entry)) return;
      },
      now, flush);
}

}  // namespace ortserve

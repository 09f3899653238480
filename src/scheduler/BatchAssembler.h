#pragma once
// Decides which queued requests run together next (Triton's dynamic batcher
// policy, minus the sequence machinery):
//  - without batching (max_batch_size 0, or dynamic batching off) the first
//    request in scheduling order runs alone;
//  - otherwise the first request heads the batch and the requests after it
//    join in queue order while they are compatible (same input names, dtypes
//    and non-batch dims) and the summed dim 0 stays <= max_batch_size; a
//    request is never split. The first request that cannot join (another
//    shape, or too large) ends the batch and releases it at once, as Triton's
//    "enforce equal shape" rule does; with `group_by_shape` it is passed
//    over instead, the batch still goes at once, and the requests after it
//    may still join;
//  - the batch goes at once when it is full (max_batch_size, or the largest
//    preferred size), when a preferred size is reached (the largest one the
//    queue allows; or the largest size below the largest preferred size when
//    the next request would overshoot it), when a queued request cannot join
//    it, when max_queue_delay is 0, or when the head has waited
//    max_queue_delay since it was queued; until then the worker waits for
//    more requests (Triton's DynamicBatchScheduler::GetDynamicBatch).
#include <cstdint>
#include <vector>

#include "scheduler/DynamicBatcherOptions.h"
#include "scheduler/RequestQueue.h"

namespace ortserve {

struct BatchPlan {
  std::vector<QueuedRequest*> members;  // empty: nothing to run yet
  // When members is empty: re-plan at this time (or when the queue changes).
  Clock::time_point wake_at = Clock::time_point::max();
  // The head request has waited max_queue_delay (a non-zero window is over).
  bool window_over = false;
};

class BatchAssembler {
 public:
  // The policy must be valid (DynamicBatcherOptions::Validate).
  explicit BatchAssembler(const BatchingPolicy& policy);

  // `flush`: do not wait for a better batch (shutting down, or no further
  // request is expected: the adaptive window, BatchPlanner).
  BatchPlan Plan(RequestQueue& queue, Clock::time_point now, bool flush) const;
  // The same over `candidates` in scheduling order (the sequence batcher's
  // oldest strategy: the head request of each candidate sequence).
  BatchPlan Plan(const std::vector<QueuedRequest*>& candidates, Clock::time_point now, bool flush) const;

 private:
  bool IsPreferred(uint64_t size) const;
  // `scan(visit)` visits the candidates in order while visit returns true.
  template <typename Scan>
  BatchPlan PlanScan(Scan&& scan, Clock::time_point now, bool flush) const;

  bool batching_;
  bool group_by_shape_;
  uint64_t max_batch_size_;
  std::vector<uint64_t> preferred_;  // sorted ascending
  // Size at which waiting cannot help: the largest preferred size, or max.
  uint64_t target_size_;
  Clock::duration max_queue_delay_;
};

}  // namespace ortserve

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
//    "enforce equal shape" rule does;
//  - the batch goes at once when it is full (max_batch_size, or the largest
//    preferred size), when a preferred size is reached (the largest one the
//    queue allows; or the largest size below the largest preferred size when
//    the next request would overshoot it), when a queued request cannot join
//    it, when max_queue_delay is 0, or when the head has waited
//    max_queue_delay since it was queued; until then the worker waits for
//    more requests (Triton's DynamicBatchScheduler::GetDynamicBatch).
//
// Grouped by shape (`group_by_shape`, shape buckets) the queue is split into
// groups, one per shape (requests that stack with the group's first one),
// and each group batches as if it had a queue of its own: the rules above
// apply within the group, so a request of another group neither ends nor
// releases a batch; a group's batch goes when it is full, reaches a
// preferred size, meets a request of its own shape that does not fit, or
// when its own head has waited max_queue_delay. Of the groups whose batch
// may go, the one whose head comes first in scheduling order (the oldest)
// goes: a group's wait is bounded by its window plus the runs that were due
// before it, and no instance waits while some group's batch may go. The
// first kMaxShapeGroups groups in scheduling order are planned; requests of
// further shapes wait until one of those has run.
#include <cstddef>
#include <cstdint>
#include <memory>
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

// What may cut a wait short.
struct PlanUrgency {
  // Do not wait for a better batch (shutting down, or no further request is
  // expected: the adaptive window, BatchPlanner).
  bool flush = false;
  // The batch this request heads goes without waiting (the rest of a batch
  // the instances shared, BatchPlanner); null: none. Without group_by_shape
  // any such request flushes the plan, since the rest heads the queue.
  const InferenceRequest* ready = nullptr;
};

class BatchAssembler {
 public:
  // Shapes planned at once under group_by_shape: bounds the work per plan
  // (a model with buckets has a few shapes, plus those of requests over the
  // largest bucket under bucket_overflow "alone").
  static constexpr size_t kMaxShapeGroups = 16;

  // The policy must be valid (DynamicBatcherOptions::Validate).
  explicit BatchAssembler(const BatchingPolicy& policy);

  BatchPlan Plan(RequestQueue& queue, Clock::time_point now, PlanUrgency urgency) const;
  // The same over `candidates` in scheduling order (the sequence batcher's
  // oldest strategy: the head request of each candidate sequence).
  BatchPlan Plan(const std::vector<QueuedRequest*>& candidates, Clock::time_point now, PlanUrgency urgency) const;

 private:
  // A batch growing from its head, in queue order.
  struct Draft {
    std::vector<QueuedRequest*> members;
    uint64_t total = 0;          // rows
    size_t preferred_count = 0;  // members prefix worth sending now; 0: none
    bool saturated = false;      // a request it could not take is queued: send now
    bool flush = false;          // send what it has without waiting
  };

  bool IsPreferred(uint64_t size) const;
  void Start(Draft& draft, QueuedRequest& head) const;
  // Whether `entry`'s rows fit beside the draft's (stacking is the caller's check).
  bool Fits(const Draft& draft, const QueuedRequest& entry) const;
  void Add(Draft& draft, QueuedRequest& entry) const;
  bool Full(const Draft& draft) const { return draft.total >= max_batch_size_; }
  // The draft as a plan: members when it may go now, else when to re-plan.
  BatchPlan Settle(Draft& draft, Clock::time_point now) const;
  // `scan(visit)` visits the candidates in order while visit returns true.
  template <typename Scan>
  BatchPlan PlanScan(Scan&& scan, Clock::time_point now, PlanUrgency urgency) const;
  template <typename Scan>
  BatchPlan PlanGroups(Scan&& scan, Clock::time_point now, PlanUrgency urgency) const;

  bool batching_;
  bool group_by_shape_;
  std::shared_ptr<const RaggedBatching> ragged_;  // may be null
  uint64_t max_batch_size_;
  std::vector<uint64_t> preferred_;  // sorted ascending
  // Size at which waiting cannot help: the largest preferred size, or max.
  uint64_t target_size_;
  Clock::duration max_queue_delay_;
};

}  // namespace ortserve

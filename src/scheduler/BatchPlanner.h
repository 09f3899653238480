#pragma once
// The batcher leader's decision: which queued requests run next, or until
// when to wait. BatchAssembler says which requests batch together (Triton's
// rules); this adds the adaptive window and the instances' shares.
//
// Adaptive window (BatchingPolicy::adaptive_window, opt-in; the default is
// Triton's fixed window): a fixed window makes every batch that is not full
// wait the whole max_queue_delay, even when no further request can come --
// 32 closed-loop clients and max_batch_size 64 pay the whole window per batch
// for nothing.
// The planner asks its ArrivalForecast instead and runs what is queued at
// once when no arrival is expected. The window still bounds every wait, so
// it only ever closes earlier than the fixed one; a lone request to an idle
// model runs at once (docs/decisions.md, "Adaptive batching window").
//
// Shares (InstanceBalancer): when the leader keeps only part of a planned
// batch, whoever plans next takes the rest without a window, since those
// requests were ready to run (under group_by_shape the rest's group only).
//
// Not thread-safe: the batcher calls it under its lock.
#include <cstdint>
#include <vector>

#include "scheduler/ArrivalForecast.h"
#include "scheduler/BatchAssembler.h"
#include "scheduler/InstanceBalancer.h"

namespace ortserve {

class BatchPlanner {
 public:
  // `balancer` must outlive the planner.
  BatchPlanner(const BatchingPolicy& policy, size_t instances, InstanceBalancer* balancer);

  // The next batch from `queue` (not empty). `stopping`: run what is queued
  // without waiting. Empty members: wait until wake_at, or a queue change.
  BatchPlan Plan(RequestQueue& queue, Clock::time_point now, bool stopping);
  // The same over `candidates` in scheduling order (BatchAssembler::Plan).
  BatchPlan Plan(const std::vector<QueuedRequest*>& candidates, Clock::time_point now, bool stopping);
  // The queue ran empty: nothing planned is left over.
  void QueueEmptied() { rest_head_ = nullptr; }

  // A request arrived / `answered` requests are about to be answered (the
  // adaptive window's forecast; no-ops with a fixed window).
  void Arrived(Clock::time_point now);
  void Answered(uint64_t answered, Clock::time_point now);

 private:
  // The assembler's plan, with the forecast and the shares applied.
  BatchPlan Settle(BatchPlan plan, bool more_expected);
  PlanUrgency Urgency(bool stopping, bool more_expected) const;

  const BatchAssembler assembler_;
  const bool adaptive_window_;
  ArrivalForecast forecast_;
  InstanceBalancer* const balancer_;
  // The first request a leader left of a ready batch it shared; null: none.
  // Only compared by address (it may have left the queue since).
  const InferenceRequest* rest_head_ = nullptr;
};

}  // namespace ortserve

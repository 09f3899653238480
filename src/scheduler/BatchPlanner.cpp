#include "scheduler/BatchPlanner.h"

#include <algorithm>

namespace ortserve {

BatchPlanner::BatchPlanner(const BatchingPolicy& policy, size_t instances, InstanceBalancer* balancer)
    : assembler_(policy),
      adaptive_window_(policy.adaptive_window),
      forecast_(static_cast<uint64_t>(std::max(policy.max_batch_size, 1)) * instances),
      balancer_(balancer) {}

BatchPlan BatchPlanner::Plan(RequestQueue& queue, Clock::time_point now, bool stopping) {
  const bool more_expected = !adaptive_window_ || forecast_.ExpectsMore(now);
  return Settle(assembler_.Plan(queue, now, Urgency(stopping, more_expected)), more_expected);
}

BatchPlan BatchPlanner::Plan(const std::vector<QueuedRequest*>& candidates, Clock::time_point now, bool stopping) {
  const bool more_expected = !adaptive_window_ || forecast_.ExpectsMore(now);
  return Settle(assembler_.Plan(candidates, now, Urgency(stopping, more_expected)), more_expected);
}

PlanUrgency BatchPlanner::Urgency(bool stopping, bool more_expected) const {
  // With no arrival expected, waiting cannot grow the batch.
  return {.flush = stopping || !more_expected, .ready = rest_head_};
}

BatchPlan BatchPlanner::Settle(BatchPlan plan, bool more_expected) {
  if (plan.members.empty()) {
    // Still expecting (else the plan went): re-plan when the expectation lapses.
    if (adaptive_window_) plan.wake_at = std::min(plan.wake_at, forecast_.ExpectUntil());
    return plan;
  }
  // A window that closed on expectations shows they were wrong.
  if (adaptive_window_ && more_expected && plan.window_over) forecast_.WindowClosed();
  rest_head_ = balancer_->KeepOwnShare(&plan.members);
  return plan;
}

void BatchPlanner::Arrived(Clock::time_point now) {
  if (adaptive_window_) forecast_.Arrived(now);
}

void BatchPlanner::Answered(uint64_t answered, Clock::time_point now) {
  if (adaptive_window_) forecast_.Answered(answered, now);
}

}  // namespace ortserve

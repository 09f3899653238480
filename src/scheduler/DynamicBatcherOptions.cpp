#include "scheduler/DynamicBatcherOptions.h"

namespace ortserve {

Status DynamicBatcherOptions::Validate() const {
  const std::string label = Label();
  const BatchingPolicy& b = batching;
  if (b.max_batch_size < 0) {
    return InvalidArgument(label + ": max_batch_size " + std::to_string(b.max_batch_size) + " is negative");
  }
  if (b.max_batch_size > 0 && b.dynamic_batching) {
    for (int size : b.preferred_batch_sizes) {
      if (size < 1 || size > b.max_batch_size) {
        return InvalidArgument(label + ": preferred batch size " + std::to_string(size) +
                               " is outside 1..max_batch_size " + std::to_string(b.max_batch_size));
      }
    }
  }
  const QueueingPolicy& q = queueing;
  if (q.priority_levels > 0 && (q.default_priority_level < 1 || q.default_priority_level > q.priority_levels)) {
    return InvalidArgument(label + ": default_priority_level " + std::to_string(q.default_priority_level) +
                           " is outside 1..priority_levels " + std::to_string(q.priority_levels));
  }
  for (const auto& [level, policy] : q.level_policies) {
    if (level < 1 || level > q.priority_levels) {
      return InvalidArgument(label + ": priority_queue_policy for level " + std::to_string(level) +
                             " is outside 1..priority_levels " + std::to_string(q.priority_levels));
    }
  }
  if (q.default_max_queue_size == 0) return InvalidArgument(label + ": default_max_queue_size must be positive");
  return Status::Ok();
}

}  // namespace ortserve

#pragma once
// What a dynamic batcher is told, grouped by the policy each part follows:
// how batches form (BatchingPolicy), how requests wait (QueueingPolicy) and
// how runs share the machine (ComputePolicy). Units are in the names.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/Status.h"
#include "scheduler/ComputeSlots.h"
#include "scheduler/RaggedBatch.h"

namespace ortserve {

// Triton's ModelQueuePolicy for one priority level.
struct QueuePolicy {
  enum class TimeoutAction { kReject, kDelay };
  uint64_t max_queue_size = 0;         // 0: QueueingPolicy::default_max_queue_size
  uint64_t default_timeout_us = 0;     // 0: none
  bool allow_timeout_override = true;  // honour the request's `timeout` parameter
  TimeoutAction timeout_action = TimeoutAction::kReject;
};

struct BatchingPolicy {
  // 0: the model has no batch dimension; requests run one at a time.
  int max_batch_size = 0;
  // Off: every request runs alone, even when the model batches.
  bool dynamic_batching = false;
  std::vector<int> preferred_batch_sizes;  // each in 1..max_batch_size
  uint64_t max_queue_delay_us = 0;
  // false (the default): Triton's fixed window, a batch that is not full and
  // has no preferred size waits max_queue_delay for more requests. true: the
  // window closes early once the requests the batcher expects have arrived
  // (scheduler/ArrivalForecast.h; config parameter batch_window "adaptive").
  bool adaptive_window = false;
  // false (the default, Triton's): a batch is a run of consecutive requests;
  // the first that cannot join ends it and releases it at once. true: the
  // queue is split by shape and each shape batches as if it had a queue of
  // its own (its own window, preferred and max sizes; a request of another
  // shape neither ends nor releases its batch); of the shapes whose batch
  // may go, the one with the oldest head goes first (BatchAssembler.h). For
  // models whose requests come in a few interleaved shapes (shape buckets,
  // serving/ShapeBuckets.h).
  bool group_by_shape = false;
  // Triton's ragged batching (scheduler/RaggedBatch.h); null or empty: none.
  std::shared_ptr<const RaggedBatching> ragged;
};

struct QueueingPolicy {
  // The bound used where a policy says 0 (Triton's "unbounded"): a request
  // is never queued without bound.
  uint64_t default_max_queue_size = 1024;
  QueuePolicy default_policy;
  // Priority levels 1..priority_levels (1 = highest); 0: no priorities.
  uint32_t priority_levels = 0;
  uint32_t default_priority_level = 0;
  std::vector<std::pair<uint32_t, QueuePolicy>> level_policies;  // level -> its policy
};

struct ComputePolicy {
  // The process's compute-thread budget, shared by all schedulers; null: no
  // limit. Each run leases `slots_per_run` slots (the instance's threads).
  std::shared_ptr<ComputeSlots> slots;
  int slots_per_run = 1;
  // Instances share the work in hand (scheduler/InstanceBalancer.h): for
  // instances on cores of their own (CPU). Off is Triton's dispatch, each
  // batch whole: for instances sharing one device (GPU), where one larger
  // batch beats concurrent halves.
  bool balance_across_instances = false;
  // Inline runs (DynamicBatcher.h): a request submitted from a thread that
  // allows them (core/InlineRuns.h) runs on that thread when the queue is
  // empty, the leader's instance and compute slots are free, the batcher
  // would release it at once, its inputs are at most kInlineRunMaxInputBytes
  // and the model's average run so far is below this many microseconds.
  // 0: never (config parameter inline_run_max_us).
  uint64_t inline_run_max_us = 0;
  static constexpr uint64_t kInlineRunMaxInputBytes = 64 * 1024;
};

struct DynamicBatcherOptions {
  std::string model_name;
  std::string model_version;
  BatchingPolicy batching;
  QueueingPolicy queueing;
  ComputePolicy compute;

  // kInvalidArgument naming the field and the limit it breaks.
  Status Validate() const;
  // "model 'x' version '1'": how messages name the model.
  std::string Label() const { return "model '" + model_name + "' version '" + model_version + "'"; }
};

}  // namespace ortserve

#pragma once
// Instances of one model share the work in hand (ComputePolicy::
// balance_across_instances): the worker that plans a batch keeps only its
// share -- the rows planned plus the rows the other instances are running,
// over the batches that can compute at once -- and leaves the rest queued,
// to run at once on the next free instance. Without it, 4 closed-loop
// clients of a compute-bound model on 2 single-thread instances settle into
// batches of 3 and 1: the instance with the 1 finishes first and idles until
// its one client is back while the other works through three
// (docs/decisions.md, "CPU instances share the work in hand").
//
// Batches that can compute at once: the instances, as far as the compute
// slots let them run together. With one (a single instance, or the policy
// off) nothing is balanced and nothing is counted.
//
// Thread safety: KeepOwnShare is called by the batcher's leader under the
// batcher's lock; Ended by any worker without it.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "scheduler/DynamicBatcherOptions.h"
#include "scheduler/RequestQueue.h"

namespace ortserve {

class InstanceBalancer {
 public:
  InstanceBalancer(const ComputePolicy& policy, size_t instances);

  bool enabled() const { return concurrent_runs_ > 1; }
  // Trims the planned batch `members` (>= 1 request, in plan order, whole
  // requests only) to a prefix, this worker's share, and counts its rows as
  // running; returns the first request it left queued (null: none).
  const InferenceRequest* KeepOwnShare(std::vector<QueuedRequest*>* members);
  // A batch of `rows` that KeepOwnShare let through has ended, run or not.
  void Ended(uint64_t rows);

 private:
  const size_t concurrent_runs_;
  std::atomic<uint64_t> running_rows_{0};  // rows of the batches taken and not ended
};

// The rows of a planned batch.
uint64_t Rows(const std::vector<QueuedRequest*>& members);

}  // namespace ortserve

#include "scheduler/InstanceBalancer.h"

#include <algorithm>

namespace ortserve {
namespace {

size_t ConcurrentRuns(const ComputePolicy& policy, size_t instances) {
  if (!policy.balance_across_instances) return 1;
  if (!policy.slots) return instances;
  const int per_run = std::max(1, policy.slots_per_run);
  return std::min(instances, static_cast<size_t>(std::max(1, policy.slots->total() / per_run)));
}

}  // namespace

uint64_t Rows(const std::vector<QueuedRequest*>& members) {
  uint64_t rows = 0;
  for (const QueuedRequest* m : members) rows += m->batch_size;
  return rows;
}

InstanceBalancer::InstanceBalancer(const ComputePolicy& policy, size_t instances)
    : concurrent_runs_(ConcurrentRuns(policy, instances)) {}

const InferenceRequest* InstanceBalancer::KeepOwnShare(std::vector<QueuedRequest*>* members) {
  if (!enabled()) return nullptr;
  const InferenceRequest* first_left = nullptr;
  if (members->size() >= 2) {
    // The work in hand: the rows planned and those the other instances run.
    const uint64_t rows = running_rows_.load(std::memory_order_relaxed) + Rows(*members);
    const uint64_t share = (rows + concurrent_runs_ - 1) / concurrent_runs_;
    size_t keep = 1;
    uint64_t taken = (*members)[0]->batch_size;
    while (keep < members->size() && taken + (*members)[keep]->batch_size <= share) {
      taken += (*members)[keep++]->batch_size;
    }
    if (keep < members->size()) {  // (requests of 0 rows may all fit)
      first_left = (*members)[keep]->request.get();
      members->resize(keep);
    }
  }
  running_rows_.fetch_add(Rows(*members), std::memory_order_relaxed);
  return first_left;
}

void InstanceBalancer::Ended(uint64_t rows) {
  if (enabled()) running_rows_.fetch_sub(rows, std::memory_order_relaxed);
}

}  // namespace ortserve

#include "repository/ThreadPlan.h"

#include <algorithm>

namespace ortserve {

ThreadPlan ThreadPlan::Compute(int budget, const std::vector<ThreadPlanRequest>& requests, bool shared_pool) {
  ThreadPlan plan;
  plan.budget = std::max(1, budget);
  plan.shared_pool = shared_pool;
  plan.shared_pool_threads = shared_pool ? plan.budget - 1 : 0;
  plan.ort_threads = plan.shared_pool_threads;
  for (const auto& r : requests) {
    ThreadPlanEntry e;
    e.label = r.label;
    e.instances = std::max(0, r.instances);
    e.explicit_intra = r.explicit_intra > 0;
    // One model's instances share the budget; other models take turns for
    // compute slots rather than shrinking this model's threads.
    e.intra = e.explicit_intra ? r.explicit_intra : std::max(1, plan.budget / std::max(1, e.instances));
    e.inter = std::max(1, r.inter);
    e.parallel_execution = r.parallel_execution;
    e.allow_spinning = r.allow_spinning;
    // A run of one thread computes on the thread that calls Run: a pool of
    // its own of one thread creates no ORT thread, and the run never waits
    // for the shared pool's threads while other runs' parallel sections
    // hold them (docs/decisions.md, "One ORT thread pool for the process").
    e.shared_pool = shared_pool && r.own_pool_reason.empty() && e.intra > 1;
    e.run_threads = e.intra + (e.parallel_execution ? e.inter : 0);
    e.total_threads = e.instances * e.run_threads;
    if (!e.shared_pool) {
      e.ort_threads = e.instances * ((e.intra - 1) + (e.parallel_execution ? e.inter - 1 : 0));
    }
    plan.total_threads += e.total_threads;
    plan.ort_threads += e.ort_threads;
    plan.entries.push_back(std::move(e));
  }
  plan.oversubscribed = plan.total_threads > plan.budget;
  return plan;
}

std::vector<std::string> ThreadPlan::Describe() const {
  std::vector<std::string> lines;
  for (const auto& e : entries) {
    if (e.shared_pool) {
      lines.push_back(e.label + ": " + std::to_string(e.instances) + " instance(s) on the shared ORT pool, " +
                      std::to_string(e.run_threads) + " thread(s) per run");
      continue;
    }
    if (e.run_threads == 1) {
      // No pool thread exists to spin, whatever allow_spinning says.
      lines.push_back(e.label + ": " + std::to_string(e.instances) +
                      " instance(s), 1 thread per run: the run-<model> thread alone, no ORT pool thread" +
                      (e.explicit_intra ? " (configured)" : ""));
      continue;
    }
    lines.push_back(e.label + ": " + std::to_string(e.instances) + " instance(s) x " + std::to_string(e.intra) +
                    " intra-op thread(s)" + (e.explicit_intra ? " (configured)" : "") +
                    (e.parallel_execution ? " + " + std::to_string(e.inter) + " inter-op" : ", sequential") +
                    ", spinning " + (e.allow_spinning ? "on" : "off") + ", own pools: " +
                    std::to_string(e.ort_threads) + " ORT thread(s) (ort-<model>)");
  }
  if (shared_pool) {
    lines.push_back("shared ORT pool: " + std::to_string(budget) + " thread(s) per run at most = " +
                    std::to_string(shared_pool_threads) + " pool thread(s) (ort-pool-N) + the run-<model> thread "
                    "that calls in");
  }
  lines.push_back("total: " + std::to_string(ort_threads) + " ORT thread(s) exist for a budget of " +
                  std::to_string(budget) + " core(s); at most " + std::to_string(budget) +
                  " compute at once (compute slots)");
  return lines;
}

}  // namespace ortserve

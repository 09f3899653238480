#include "repository/ThreadPlan.h"

#include <algorithm>

namespace ortserve {

ThreadPlan ThreadPlan::Compute(int budget, const std::vector<ThreadPlanRequest>& requests) {
  ThreadPlan plan;
  plan.budget = std::max(1, budget);
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
    e.total_threads = e.instances * (e.intra + (e.parallel_execution ? e.inter : 0));
    plan.total_threads += e.total_threads;
    plan.entries.push_back(std::move(e));
  }
  plan.oversubscribed = plan.total_threads > plan.budget;
  return plan;
}

std::vector<std::string> ThreadPlan::Describe() const {
  std::vector<std::string> lines;
  for (const auto& e : entries) {
    lines.push_back(e.label + ": " + std::to_string(e.instances) + " instance(s) x " +
                    std::to_string(e.intra) + " intra-op thread(s)" +
                    (e.explicit_intra ? " (configured)" : "") +
                    (e.parallel_execution ? " + " + std::to_string(e.inter) + " inter-op"
                                          : ", sequential") +
                    ", spinning " + (e.allow_spinning ? "on" : "off") + " = " +
                    std::to_string(e.total_threads) + " thread(s)");
  }
  lines.push_back("total: " + std::to_string(total_threads) + " ORT thread(s) for a budget of " +
                  std::to_string(budget) + " core(s); at most " + std::to_string(budget) +
                  " compute at once (compute slots)");
  return lines;
}

}  // namespace ortserve

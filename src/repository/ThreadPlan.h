#pragma once
// The process-wide CPU thread plan: how many ORT intra-op/inter-op threads each
// model instance gets, so that instances x threads stay within the core budget.
//
// Rule: instances whose config sets intra_op_thread_count keep it; every
// other instance gets intra = max(1, budget / instances of its own model), so
// one busy model can use every core (a model alone on the machine runs as fast
// as in-process ORT with the same threads). With several models the threads
// that exist add up to more than the budget (`oversubscribed`), but the
// threads computing at once never do: every execution leases its threads from
// the process's ComputeSlots (scheduler/ComputeSlots.h), so executions of
// different models take turns instead of contending for cores.
//
// Spinning is off by default: a spinning ORT pool busy-waits for work after
// each run, which buys microseconds of hand-off latency at the price of idle
// cores burning at 100%. A server mostly waits for requests, and with several
// instances the spinners steal cores from the instances doing real work.
#include <string>
#include <vector>

namespace ortserve {

struct ThreadPlanRequest {
  std::string label;          // "model:version"
  int instances = 1;
  int explicit_intra = 0;     // intra_op_thread_count from config; 0: planned
  int inter = 1;              // inter_op_thread_count (used in parallel mode only)
  bool parallel_execution = false;
  bool allow_spinning = false;
};

struct ThreadPlanEntry {
  std::string label;
  int instances = 0;
  int intra = 1;
  int inter = 1;
  bool parallel_execution = false;
  bool allow_spinning = false;
  bool explicit_intra = false;
  // instances x (intra + inter when parallel).
  int total_threads = 0;
};

struct ThreadPlan {
  int budget = 0;
  std::vector<ThreadPlanEntry> entries;  // parallel to the requests
  int total_threads = 0;
  bool oversubscribed = false;

  // `budget` <= 0 is treated as 1.
  static ThreadPlan Compute(int budget, const std::vector<ThreadPlanRequest>& requests);

  // One line per entry plus a total line, for the startup log.
  std::vector<std::string> Describe() const;
};

}  // namespace ortserve

#pragma once
// The process-wide CPU thread plan: how many ORT intra-op/inter-op threads each
// model instance gets, so that instances x threads stay within the core budget.
//
// Rule: instances whose config sets intra_op_thread_count keep it; the budget
// left after them is split evenly over all other instances,
// intra = max(1, remaining / auto_instances). The plan is oversubscribed when
// its total exceeds the budget, which only happens when the user set threads
// explicitly or there are more instances than cores. Even then the threads
// computing at once never exceed the budget: every execution leases its
// threads from the process's ComputeSlots (scheduler/ComputeSlots.h), so an
// oversubscribed plan costs waiting, not contention.
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

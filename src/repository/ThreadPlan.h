#pragma once
// The process-wide CPU thread plan: which ORT threads exist, and how many
// threads each run of each model instance computes on, so that the threads
// computing at once stay within the core budget (--thread-budget).
//
// Shared pool (the default, --ort-thread-pool shared): the process has one
// ORT intra-op pool of `budget` threads -- budget - 1 pool threads named
// ort-pool-N, plus the run-<model> thread that calls Run and computes too --
// and every model instance runs on it. The ORT threads that exist are the
// same with 1 model or 100 (docs/decisions.md, "One ORT thread pool for the
// process").
//
// A run of one thread (budget / instances is 1, or intra_op_thread_count 1)
// computes on its run-<model> thread alone: its session has a pool of one
// thread, which ORT runs on the caller, so no ORT thread exists for it.
//
// Own pools: a model that asks for them (config parameter intra_op_thread_count,
// execution_mode 1 (its inter-op pool), allow_spinning 1, or
// ort_thread_pool "own"; docs/model-config.md, "Thread pools"), and every
// model under --ort-thread-pool per-session, gets a pool per instance, as
// ORT's per-session default.
//
// Either way, a run computes on `run_threads` threads: the configured
// intra_op_thread_count, or max(1, budget / instances of its own model), so
// one busy model can use every core (a model alone on the machine runs as
// fast as in-process ORT with the same threads). Every execution leases
// that many slots from the process's ComputeSlots (scheduler/ComputeSlots.h),
// so executions of different models take turns instead of contending.
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
  // Why the model asks for pools of its own ("" when it does not).
  std::string own_pool_reason;
};

struct ThreadPlanEntry {
  std::string label;
  int instances = 0;
  int intra = 1;
  int inter = 1;
  bool parallel_execution = false;
  bool allow_spinning = false;
  bool explicit_intra = false;
  // Runs on the process's shared ORT pool (no threads of its own); never
  // for a run of one thread, which computes on the calling thread alone.
  bool shared_pool = false;
  // Threads one run computes on: intra (+ inter when parallel); the compute
  // slots each execution leases.
  int run_threads = 1;
  // instances x run_threads.
  int total_threads = 0;
  // ORT threads its sessions create: none on the shared pool; per instance
  // intra - 1 (+ inter - 1 when parallel) with own pools (the calling thread
  // is part of each pool).
  int ort_threads = 0;
};

struct ThreadPlan {
  int budget = 0;
  // The shared pool's threads (budget - 1; 0 without a shared pool).
  bool shared_pool = false;
  int shared_pool_threads = 0;
  std::vector<ThreadPlanEntry> entries;  // parallel to the requests
  // Sum of the entries' total_threads: threads that could compute at once
  // without the compute slots.
  int total_threads = 0;
  // ORT threads that exist: the shared pool's plus every own pool's.
  int ort_threads = 0;
  bool oversubscribed = false;

  // `budget` <= 0 is treated as 1. `shared_pool`: the process has the
  // shared ORT pool, and models that do not ask for their own run on it.
  static ThreadPlan Compute(int budget, const std::vector<ThreadPlanRequest>& requests, bool shared_pool);

  // One line per entry plus the pool and total lines, for the startup log.
  // The total line reads "total: N ORT thread(s) exist ..." (tests read N).
  std::vector<std::string> Describe() const;
};

}  // namespace ortserve

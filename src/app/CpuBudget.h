#pragma once
// How many CPUs this process may really use, for --thread-budget's default.
//
// std::thread::hardware_concurrency() counts the machine's cores; inside a
// container that overstates what the process gets twice over: its CPU
// affinity (cpuset) may hold fewer cores, and its cgroup's CPU quota
// (cgroup v2 cpu.max, cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us, what a
// Kubernetes CPU limit becomes) caps the CPU time per period. ONNX Runtime's
// own thread pools size themselves from the core count (onnxruntime #29510),
// so a replica limited to 2 CPUs on a 64-core node would start 64 threads and
// be throttled. The budget is the smallest of the three, and its source is
// reported so the startup log says why.
#include <string>

namespace ortserve::app {

struct CpuBudget {
  int cpus = 1;        // >= 1
  std::string source;  // e.g. "cgroup v2 cpu.max 150000 100000 at /sys/fs/cgroup/kubepods/..."
};

// Where the detection reads; tests point these at files they write.
struct CpuBudgetPaths {
  std::string cgroup_root = "/sys/fs/cgroup";   // where the cgroup file systems are mounted
  std::string proc_self_cgroup = "/proc/self/cgroup";
  int affinity_cpus = 0;                        // 0: sched_getaffinity() of this process
};

// A quota of `quota_us` per `period_us` as whole CPUs: rounded down (a
// budget above the quota makes the threads run into CFS throttling, which
// stalls every thread for the rest of the period), at least 1.
int QuotaToCpus(long long quota_us, long long period_us);

// The CPUs this process may use: min(affinity, every cgroup CPU quota from
// its own cgroup up to the root, v2 and v1). Never fails: unreadable or
// absent files mean "no limit from there".
CpuBudget DetectCpuBudget(const CpuBudgetPaths& paths = {});

}  // namespace ortserve::app

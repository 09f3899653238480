#include "app/CpuBudget.h"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

namespace ortserve::app {
namespace {

namespace fs = std::filesystem;

struct CgroupLine {
  std::string controllers;  // empty on the cgroup v2 line "0::/path"
  std::string path;
};

// /proc/self/cgroup: "<id>:<controllers>:<path>" per hierarchy.
std::vector<CgroupLine> ReadCgroupLines(const std::string& file) {
  std::vector<CgroupLine> lines;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    lines.push_back({line.substr(a + 1, b - a - 1), line.substr(b + 1)});
  }
  return lines;
}

std::optional<std::string> ReadFirstLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

// The directories whose CPU limits apply to a process in cgroup `path` of
// the hierarchy mounted at `mount`: its own and every ancestor's up to the
// mount. A container often sees only its own cgroup mounted at `mount`
// while /proc/self/cgroup names the host's path; then the mount itself is
// the process's cgroup.
std::vector<fs::path> CgroupChain(const fs::path& mount, const std::string& path) {
  fs::path rel = fs::path(path).relative_path();
  std::error_code ec;
  if (!fs::is_directory(mount / rel, ec)) rel.clear();
  std::vector<fs::path> chain;
  for (fs::path p = rel;; p = p.parent_path()) {
    chain.push_back(mount / p);
    if (p.empty() || p == p.parent_path()) break;
  }
  return chain;
}

struct Limit {
  int cpus;
  std::string source;
};

void KeepSmaller(std::optional<Limit>& best, Limit candidate) {
  if (!best || candidate.cpus < best->cpus) best = std::move(candidate);
}

// cgroup v2: cpu.max holds "<quota> <period>" or "max <period>".
void ApplyV2(const fs::path& mount, const std::string& path, std::optional<Limit>& best) {
  for (const fs::path& dir : CgroupChain(mount, path)) {
    auto line = ReadFirstLine(dir / "cpu.max");
    if (!line) continue;
    std::istringstream in(*line);
    std::string quota;
    long long period = 0;
    if (!(in >> quota >> period) || quota == "max") continue;
    long long quota_us = 0;
    try {
      quota_us = std::stoll(quota);
    } catch (...) {
      continue;
    }
    if (quota_us <= 0 || period <= 0) continue;
    KeepSmaller(best, {QuotaToCpus(quota_us, period),
                       "cgroup v2 cpu.max " + *line + " at " + (dir / "cpu.max").string()});
  }
}

// cgroup v1: cpu.cfs_quota_us (-1: none) per cpu.cfs_period_us, in the
// hierarchy whose controllers include "cpu" (mounted as e.g. cpu,cpuacct).
void ApplyV1(const fs::path& root, const CgroupLine& line, std::optional<Limit>& best) {
  for (const fs::path& dir : CgroupChain(root / line.controllers, line.path)) {
    auto quota = ReadFirstLine(dir / "cpu.cfs_quota_us");
    auto period = ReadFirstLine(dir / "cpu.cfs_period_us");
    if (!quota || !period) continue;
    long long q = 0, p = 0;
    try {
      q = std::stoll(*quota);
      p = std::stoll(*period);
    } catch (...) {
      continue;
    }
    if (q <= 0 || p <= 0) continue;
    KeepSmaller(best, {QuotaToCpus(q, p), "cgroup v1 cpu.cfs_quota_us " + *quota + " / cpu.cfs_period_us " + *period +
                                              " at " + dir.string()});
  }
}

bool HasCpuController(const std::string& controllers) {
  std::istringstream in(controllers);
  std::string c;
  while (std::getline(in, c, ',')) {
    if (c == "cpu") return true;
  }
  return false;
}

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

int QuotaToCpus(long long quota_us, long long period_us) {
  if (quota_us <= 0 || period_us <= 0) return 1;
  return static_cast<int>(std::max(1LL, quota_us / period_us));
}

CpuBudget DetectCpuBudget(const CpuBudgetPaths& paths) {
  const int affinity = paths.affinity_cpus > 0 ? paths.affinity_cpus : AffinityCpus();
  std::optional<Limit> quota;
  const fs::path root(paths.cgroup_root);
  for (const CgroupLine& line : ReadCgroupLines(paths.proc_self_cgroup)) {
    if (line.controllers.empty()) {
      // The unified hierarchy is at the root (pure v2) or at unified/ (hybrid).
      std::error_code ec;
      const bool hybrid = fs::exists(root / "unified" / "cgroup.controllers", ec);
      ApplyV2(hybrid ? root / "unified" : root, line.path, quota);
    } else if (HasCpuController(line.controllers)) {
      ApplyV1(root, line, quota);
    }
  }
  if (quota && quota->cpus < affinity) return {quota->cpus, quota->source};
  return {affinity, "CPU affinity of the process (" + std::to_string(affinity) + " CPUs)" +
                        (quota ? "; its cgroup quota allows " + std::to_string(quota->cpus) : "; no cgroup CPU quota")};
}

}  // namespace ortserve::app

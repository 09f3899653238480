#include "app/DescriptorLimit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

namespace ortserve::app {
namespace {

uint64_t FromRlim(rlim_t value) {
  return value == RLIM_INFINITY ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(value);
}

// The most descriptors the kernel lets one process have (setrlimit refuses
// more than this even when the hard limit is unlimited).
std::optional<rlim_t> KernelCeiling() {
  std::ifstream in("/proc/sys/fs/nr_open");
  unsigned long long n = 0;
  if (in >> n && n > 0) return static_cast<rlim_t>(n);
  return std::nullopt;
}

}  // namespace

DescriptorLimit RaiseDescriptorLimit() {
  DescriptorLimit out;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    out.error = std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    return out;
  }
  out.soft_before = out.soft = FromRlim(limit.rlim_cur);
  out.hard = FromRlim(limit.rlim_max);
  rlim_t target = limit.rlim_max;
  if (target == RLIM_INFINITY) {
    const std::optional<rlim_t> ceiling = KernelCeiling();
    if (!ceiling) return out;  // nothing known to raise it to
    target = *ceiling;
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur >= target) return out;
  limit.rlim_cur = target;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    out.error = std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    return out;
  }
  out.soft = FromRlim(target);
  return out;
}

std::optional<std::string> ConnectionLimitWarning(uint64_t connections, uint64_t soft_limit) {
  if (connections + kReservedDescriptors <= soft_limit) return std::nullopt;
  return "the connection limits add up to " + std::to_string(connections) + " connections, and with " +
         std::to_string(kReservedDescriptors) + " descriptors for the server itself that is more than its " +
         "descriptor limit of " + std::to_string(soft_limit) +
         " (RLIMIT_NOFILE): under a full load accepts fail (and pause) before the limits answer. Raise the hard "
         "limit (ulimit -Hn, LimitNOFILE=, the container's nofile) or lower --http-max-connections / "
         "--grpc-max-connections / --metrics-max-connections (docs/limits.md)";
}

}  // namespace ortserve::app

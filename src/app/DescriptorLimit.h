#pragma once
// The process's file descriptor limit (RLIMIT_NOFILE), raised at startup.
//
// Every client connection holds a descriptor, and so does every model file,
// log file and shared memory region being mapped. systemd and many container
// runtimes start services with a soft limit of 1,024 (and a far higher hard
// limit): fewer than --http-max-connections' default plus the metrics and
// gRPC connections. A process may raise its soft limit to its hard limit
// without privileges, so the server does, and logs both. The connection
// limits are then checked against what it got (docs/limits.md).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ortserve::app {

struct DescriptorLimit {
  uint64_t soft_before = 0;
  uint64_t soft = 0;  // after raising
  uint64_t hard = 0;  // RLIM_INFINITY reads as UINT64_MAX
  std::string error;  // why raising failed; empty when it did not
};

// Raises the soft RLIMIT_NOFILE to the hard limit (where the hard limit is
// unlimited: to the kernel's per-process ceiling, /proc/sys/fs/nr_open).
DescriptorLimit RaiseDescriptorLimit();

// Descriptors the server keeps for itself beyond its client connections:
// listening sockets, epoll and eventfds, logs, model files while loading,
// gRPC's own, shared memory regions being mapped.
inline constexpr uint64_t kReservedDescriptors = 64;

// A warning when `connections` (the connection limits added up) plus the
// reserve exceed the soft limit; nullopt when they fit.
std::optional<std::string> ConnectionLimitWarning(uint64_t connections, uint64_t soft_limit);

}  // namespace ortserve::app

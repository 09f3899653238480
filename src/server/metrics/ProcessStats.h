#pragma once
// This process's CPU time, resident memory, thread count and start time, read
// from /proc (Linux). Fields that cannot be read stay unset.
#include <cstdint>
#include <optional>
#include <string_view>

namespace ortserve::metrics {

struct ProcessStats {
  std::optional<double> cpu_seconds;         // user + system
  std::optional<uint64_t> resident_bytes;
  std::optional<uint64_t> threads;
  std::optional<double> start_time_seconds;  // since the Unix epoch
};

ProcessStats ReadProcessStats();

// Parses the contents of /proc/<pid>/stat and the "btime" of /proc/stat
// (0: unknown); the clock tick and page size are the system's. Exposed for tests.
ProcessStats ParseProcStat(std::string_view stat, uint64_t boot_time_seconds, long ticks_per_second,
                           long page_size);

}  // namespace ortserve::metrics

#include "server/metrics/ProcessStats.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ortserve::metrics {
namespace {

std::string ReadAll(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t BootTimeSeconds() {
  const std::string stat = ReadAll("/proc/stat");
  const size_t pos = stat.find("\nbtime ");
  if (pos == std::string::npos) return 0;
  uint64_t value = 0;
  const char* begin = stat.data() + pos + 7;
  std::from_chars(begin, stat.data() + stat.size(), value);
  return value;
}

}  // namespace

ProcessStats ParseProcStat(std::string_view stat, uint64_t boot_time_seconds, long ticks_per_second,
                           long page_size) {
  ProcessStats out;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the
  // fields are counted from the last ')'. Field 3 (state) is index 0 below.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return out;
  std::vector<std::string_view> fields;
  size_t pos = close + 1;
  while (pos < stat.size()) {
    while (pos < stat.size() && (stat[pos] == ' ' || stat[pos] == '\n')) ++pos;
    size_t end = pos;
    while (end < stat.size() && stat[end] != ' ' && stat[end] != '\n') ++end;
    if (end > pos) fields.push_back(stat.substr(pos, end - pos));
    pos = end;
  }
  auto field = [&](int number) -> std::optional<uint64_t> {  // man 5 proc numbering
    const size_t index = static_cast<size_t>(number - 3);
    if (index >= fields.size()) return std::nullopt;
    uint64_t value = 0;
    const std::string_view f = fields[index];
    const auto r = std::from_chars(f.data(), f.data() + f.size(), value);
    if (r.ec != std::errc() || r.ptr != f.data() + f.size()) return std::nullopt;
    return value;
  };
  const auto utime = field(14), stime = field(15), threads = field(20), start = field(22), rss = field(24);
  if (ticks_per_second > 0 && utime && stime) {
    out.cpu_seconds = static_cast<double>(*utime + *stime) / static_cast<double>(ticks_per_second);
  }
  if (threads) out.threads = *threads;
  if (rss && page_size > 0) out.resident_bytes = *rss * static_cast<uint64_t>(page_size);
  if (start && boot_time_seconds > 0 && ticks_per_second > 0) {
    out.start_time_seconds =
        static_cast<double>(boot_time_seconds) + static_cast<double>(*start) / static_cast<double>(ticks_per_second);
  }
  return out;
}

ProcessStats ReadProcessStats() {
  return ParseProcStat(ReadAll("/proc/self/stat"), BootTimeSeconds(), sysconf(_SC_CLK_TCK),
                       sysconf(_SC_PAGESIZE));
}

}  // namespace ortserve::metrics

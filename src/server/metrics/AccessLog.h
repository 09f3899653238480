#pragma once
// The access log: one JSON object per line on stdout per completed infer
// request (--access-log), keeping a deterministic fraction of them
// (--access-log-sample-rate): with rate r the n-th request is written when
// floor(n*r) advances, so exactly about r of every request stream is kept and
// no lock or random number is needed.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/AccessLogRecord.h"

namespace spdlog {
class logger;
}

namespace ortserve::metrics {

class AccessLog {
 public:
  // sample_rate in [0, 1] (clamped). `json_log` (--log-format=json): each
  // line also has the server log's JSON fields (FormatJsonLogLine).
  explicit AccessLog(double sample_rate, bool json_log = false);
  ~AccessLog();
  void Write(const AccessLogRecord& record);

  // The JSON line (without the newline) for `record` at `unix_ms`. For tests.
  static std::string Format(const AccessLogRecord& record, int64_t unix_ms);
  // The same fields in the server log's JSON schema (LogControl.h): "time"
  // with microseconds, "level" INFO, "thread", "message" "access", then the
  // record's. For tests.
  static std::string FormatJsonLogLine(const AccessLogRecord& record, std::chrono::system_clock::time_point time,
                                       size_t thread);
  // Whether the n-th request (0-based) is kept at `sample_rate`. For tests.
  static bool Sampled(uint64_t n, double sample_rate);

 private:
  const double sample_rate_;
  const bool json_log_;
  std::atomic<uint64_t> seen_{0};
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace ortserve::metrics

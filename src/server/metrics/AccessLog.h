#pragma once
// The access log: one JSON object per line on stdout per completed infer
// request (--access-log), keeping a deterministic fraction of them
// (--access-log-sample-rate): with rate r the n-th request is written when
// floor(n*r) advances (core/EvenSampler.h), so exactly about r of every
// request stream is kept and no lock or random number is needed.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/AccessLogRecord.h"
#include "core/EvenSampler.h"

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

 private:
  EvenSampler sampler_;
  const bool json_log_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace ortserve::metrics

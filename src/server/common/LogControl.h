#pragma once
// The server log (spdlog's default logger) and its run-time settings, as
// Triton's logging extension names them (docs/protocol/extension_logging.md):
// log_file, log_info, log_warning, log_error, log_verbose_level, log_format.
// Both front ends read and change them through one LogControl (HTTP
// /v2/logging, gRPC LogSettings); main() installs it from the --log-* flags.
//
// Levels: log_info/log_warning/log_error switch INFO, WARNING and ERROR
// (with critical) lines on or off each; log_verbose_level 1 adds ortserve's
// debug lines, 2 and above its trace lines (one per HTTP request, ...).
// Formats (Triton's layouts, in UTC, without Triton's source file:line):
//   default   I1202 05:30:26.123456 1234] message
//   ISO8601   2026-12-02T05:30:26Z I 1234] message
//   json      {"time":"2026-12-02T05:30:26.123456Z","level":"INFO","thread":5678,
//              "message":"..."} (ortserve's own; one object per line, and
//              inside a request's LogScope also model, version, request_id,
//              trace_id, span_id: core/LogContext.h)
// (level letter, time, process id). Verbose lines carry the letter I, as in
// Triton. The log file cannot change at run time (as in current Triton).
//
// Thread-safe: logging goes on while settings change.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/Status.h"

namespace spdlog::level {
enum level_enum : int;
}

namespace ortserve::common {

enum class LogFormat { kDefault, kIso8601, kJson };
// "default", "ISO8601", "json".
std::string_view LogFormatName(LogFormat format);
// Parses Triton's names and "json"; nullopt for anything else.
std::optional<LogFormat> ParseLogFormat(std::string_view name);

struct LogSettings {
  std::string file;  // empty: standard output
  bool info = true;
  bool warning = true;
  bool error = true;
  uint32_t verbose_level = 0;
  LogFormat format = LogFormat::kDefault;
};

// A run-time change: fields left unset stay as they are.
struct LogSettingsChange {
  std::optional<bool> info;
  std::optional<bool> warning;
  std::optional<bool> error;
  std::optional<uint32_t> verbose_level;
  std::optional<LogFormat> format;
};

// What a request that tries to move the log file is answered (kUnsupported,
// Triton's words).
Status LogFileNotChangeable();
// Triton's words for a log_format that is not "default", "ISO8601" or "json".
Status UnknownLogFormat(std::string_view got);

// A JSON log line's "level": TRACE, DEBUG, INFO, WARNING, ERROR, CRITICAL.
std::string_view JsonLevelName(spdlog::level::level_enum level);
// "2026-12-02T05:30:26.123456Z" (RFC 3339, UTC, microseconds) appended to `out`.
void AppendRfc3339Micros(std::chrono::system_clock::time_point time, std::string* out);

// `message` as one --log-format=json line at `level`, "\n" included, as
// the server log writes it on this thread now (for text written outside the
// log, such as the command-line warnings).
std::string FormatJsonLogLine(spdlog::level::level_enum level, std::string_view message);

class LevelFilterSink;

class LogControl {
 public:
  // Makes spdlog's default logger write to `initial.file` (appended to;
  // created if missing) or standard output, with `initial`'s levels and
  // format. kInvalidArgument when the file cannot be opened.
  static Result<std::shared_ptr<LogControl>> Install(const LogSettings& initial);

  LogSettings Current() const;
  // Applies every field `change` sets, at once.
  void Apply(const LogSettingsChange& change);

  explicit LogControl(LogSettings initial, std::shared_ptr<LevelFilterSink> sink);

 private:
  void ApplyLocked();

  mutable std::mutex mu_;
  LogSettings settings_;  // guarded by mu_
  const std::shared_ptr<LevelFilterSink> sink_;
};

}  // namespace ortserve::common

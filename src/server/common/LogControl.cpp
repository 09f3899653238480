#include "server/common/LogControl.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "core/LogContext.h"
#include "core/Hex.h"
#include "core/Utf8.h"
#include "server/json/JsonWriter.h"

namespace ortserve::common {

// Passes each line to the real sink (console or file) when its level is
// switched on: spdlog's own level is a threshold, while Triton switches INFO,
// WARNING and ERROR each on its own. Verbose (debug, trace) lines are let
// through here; the logger's level, set from log_verbose_level, decides them.
class LevelFilterSink final : public spdlog::sinks::sink {
 public:
  explicit LevelFilterSink(std::shared_ptr<spdlog::sinks::sink> target) : target_(std::move(target)) {}

  // A line that quotes a client's bytes (a model name from a path with
  // %c0%ae) reaches the log as valid UTF-8: each byte that starts no
  // well-formed sequence becomes U+FFFD (core/Utf8.h).
  void log(const spdlog::details::log_msg& msg) override {
    if (!Enabled(msg.level)) return;
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    if (IsValidUtf8(payload)) return target_->log(msg);
    std::string valid;
    valid.reserve(payload.size() + 8);
    AppendValidUtf8(&valid, payload);
    spdlog::details::log_msg repaired = msg;
    repaired.payload = spdlog::string_view_t(valid.data(), valid.size());
    target_->log(repaired);
  }
  void flush() override { target_->flush(); }
  void set_pattern(const std::string& pattern) override { target_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    target_->set_formatter(std::move(formatter));
  }

  void Enable(bool info, bool warning, bool error) {
    info_.store(info, std::memory_order_relaxed);
    warning_.store(warning, std::memory_order_relaxed);
    error_.store(error, std::memory_order_relaxed);
  }

 private:
  bool Enabled(spdlog::level::level_enum level) const {
    switch (level) {
      case spdlog::level::info: return info_.load(std::memory_order_relaxed);
      case spdlog::level::warn: return warning_.load(std::memory_order_relaxed);
      case spdlog::level::err:
      case spdlog::level::critical: return error_.load(std::memory_order_relaxed);
      default: return true;
    }
  }

  const std::shared_ptr<spdlog::sinks::sink> target_;
  std::atomic<bool> info_{true};
  std::atomic<bool> warning_{true};
  std::atomic<bool> error_{true};
};

namespace {

// Triton's level letters: E, W, and I for everything else (verbose included).
class TritonLevelLetter final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const char letter = msg.level >= spdlog::level::err ? 'E' : msg.level == spdlog::level::warn ? 'W' : 'I';
    dest.push_back(letter);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<TritonLevelLetter>(); }
};

// --log-format=json: one object per line, {"time","level","thread","message"}
// and, inside a request's LogScope (core/LogContext.h), "model", "version",
// "request_id" and, for a traced request, "trace_id" and "span_id". Strings
// are JSON-escaped; bytes that are not UTF-8 become U+FFFD (JsonWriter).
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line;
    line.reserve(128 + msg.payload.size());
    line += "{\"time\":\"";
    AppendRfc3339Micros(msg.time, &line);
    line += "\",\"level\":\"";
    line += JsonLevelName(msg.level);
    line += "\",\"thread\":" + std::to_string(msg.thread_id) + ",\"message\":";
    JsonWriter::AppendQuoted(&line, std::string_view(msg.payload.data(), msg.payload.size()));
    if (const LogContext* context = CurrentLogContext()) AppendContext(*context, &line);
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonLineFormatter>(); }

 private:
  static void AppendContext(const LogContext& c, std::string* line) {
    const auto key = [line](std::string_view name) {
      *line += ",\"";
      *line += name;
      *line += "\":";
    };
    key("model");
    JsonWriter::AppendQuoted(line, c.model);
    key("version");
    JsonWriter::AppendQuoted(line, c.version);
    key("request_id");
    JsonWriter::AppendQuoted(line, c.request_id);
    if (c.traced()) {
      key("trace_id");
      AppendQuotedHex(c.trace_id.bytes, line);
      key("span_id");
      AppendQuotedHex(c.span_id.bytes, line);
    }
  }
  template <size_t N>
  static void AppendQuotedHex(const std::array<uint8_t, N>& bytes, std::string* line) {
    line->push_back('"');
    AppendHex(bytes.data(), N, line);
    line->push_back('"');
  }
};

std::unique_ptr<spdlog::formatter> FormatterFor(LogFormat format) {
  if (format == LogFormat::kJson) return std::make_unique<JsonLineFormatter>();
  // %* is the level letter; %^ %$ colour it on a terminal.
  const char* pattern = format == LogFormat::kIso8601 ? "%Y-%m-%dT%H:%M:%SZ %^%*%$ %P] %v"
                                                      : "%^%*%$%m%d %H:%M:%S.%f %P] %v";
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<TritonLevelLetter>('*').set_pattern(pattern);
  return formatter;
}

spdlog::level::level_enum LoggerLevel(uint32_t verbose_level) {
  if (verbose_level >= 2) return spdlog::level::trace;
  return verbose_level == 1 ? spdlog::level::debug : spdlog::level::info;
}

}  // namespace

std::string_view LogFormatName(LogFormat format) {
  switch (format) {
    case LogFormat::kIso8601: return "ISO8601";
    case LogFormat::kJson: return "json";
    case LogFormat::kDefault: break;
  }
  return "default";
}

std::optional<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "default") return LogFormat::kDefault;
  if (name == "ISO8601") return LogFormat::kIso8601;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

std::string_view JsonLevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return "TRACE";
    case spdlog::level::debug: return "DEBUG";
    case spdlog::level::info: return "INFO";
    case spdlog::level::warn: return "WARNING";
    case spdlog::level::err: return "ERROR";
    case spdlog::level::critical: return "CRITICAL";
    default: return "INFO";
  }
}

void AppendRfc3339Micros(std::chrono::system_clock::time_point time, std::string* out) {
  // Times before 1970 do not occur here; the arithmetic assumes none.
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(micros / 1000000);
  const long fraction = static_cast<long>(micros % 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  const int m = std::snprintf(buf + n, sizeof(buf) - n, ".%06ldZ", fraction);
  out->append(buf, n + static_cast<size_t>(m));
}

std::string FormatJsonLogLine(spdlog::level::level_enum level, std::string_view message) {
  const spdlog::details::log_msg msg(spdlog::source_loc{}, "ortserve", level,
                                     spdlog::string_view_t(message.data(), message.size()));
  spdlog::memory_buf_t buf;
  JsonLineFormatter().format(msg, buf);
  return std::string(buf.data(), buf.size());
}

Status LogFileNotChangeable() {
  return Unsupported("log file location can not be updated through network protocol");
}

Status UnknownLogFormat(std::string_view got) {
  return InvalidArgument("invalid argument for log_format, got: " + std::string(got.substr(0, 64)) +
                         " (expected default, ISO8601 or json)");
}

Result<std::shared_ptr<LogControl>> LogControl::Install(const LogSettings& initial) {
  std::shared_ptr<spdlog::sinks::sink> target;
  if (initial.file.empty()) {
    target = std::make_shared<spdlog::sinks::stdout_color_sink_mt>();
  } else {
    try {
      target = std::make_shared<spdlog::sinks::basic_file_sink_mt>(initial.file, /*truncate=*/false);
    } catch (const std::exception& e) {
      return InvalidArgument("--log-file: cannot open '" + initial.file + "': " + e.what());
    }
  }
  auto sink = std::make_shared<LevelFilterSink>(std::move(target));
  auto logger = std::make_shared<spdlog::logger>("ortserve", sink);
  // Every line reaches the file at once (a file sink buffers otherwise), so
  // that what a log shows is what happened so far.
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  auto control = std::make_shared<LogControl>(initial, std::move(sink));
  std::lock_guard lock(control->mu_);
  control->ApplyLocked();
  return control;
}

LogControl::LogControl(LogSettings initial, std::shared_ptr<LevelFilterSink> sink)
    : settings_(std::move(initial)), sink_(std::move(sink)) {}

LogSettings LogControl::Current() const {
  std::lock_guard lock(mu_);
  return settings_;
}

void LogControl::Apply(const LogSettingsChange& change) {
  std::lock_guard lock(mu_);
  if (change.info) settings_.info = *change.info;
  if (change.warning) settings_.warning = *change.warning;
  if (change.error) settings_.error = *change.error;
  if (change.verbose_level) settings_.verbose_level = *change.verbose_level;
  if (change.format) settings_.format = *change.format;
  ApplyLocked();
}

void LogControl::ApplyLocked() {
  sink_->Enable(settings_.info, settings_.warning, settings_.error);
  // The logger's formatter goes to its sink (which locks around each line),
  // so lines written meanwhile are whole, in the old format or the new.
  spdlog::default_logger_raw()->set_formatter(FormatterFor(settings_.format));
  RequestLogFieldsWanted().store(settings_.format == LogFormat::kJson, std::memory_order_relaxed);
  spdlog::set_level(LoggerLevel(settings_.verbose_level));
}

}  // namespace ortserve::common

#include "server/metrics/AccessLog.h"

#include <spdlog/details/os.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "server/common/LogControl.h"
#include "server/json/JsonWriter.h"

namespace ortserve::metrics {
namespace {

std::string IsoTime(int64_t unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(buf, n) + "." + std::to_string(1000 + unix_ms % 1000).substr(1) + "Z";
}

// The record's fields, each after a ','.
void AppendFields(const AccessLogRecord& r, std::string* out) {
  *out += ",\"request_id\":";
  JsonWriter::AppendQuoted(out, r.request_id);
  *out += ",\"model\":";
  JsonWriter::AppendQuoted(out, r.model);
  *out += ",\"version\":";
  JsonWriter::AppendQuoted(out, r.version);
  *out += ",\"protocol\":";
  JsonWriter::AppendQuoted(out, r.protocol);
  *out += ",\"status\":" + std::to_string(r.status_code);
  *out += ",\"queue_us\":" + std::to_string(r.queue_ns / 1000);
  *out += ",\"compute_us\":" + std::to_string(r.compute_ns / 1000);
  *out += ",\"batch_size\":" + std::to_string(r.batch_size);
  *out += ",\"bytes_in\":" + std::to_string(r.bytes_in);
  *out += ",\"bytes_out\":" + std::to_string(r.bytes_out);
  if (!r.trace_id.empty()) {
    *out += ",\"trace_id\":";
    JsonWriter::AppendQuoted(out, r.trace_id);
    *out += ",\"span_id\":";
    JsonWriter::AppendQuoted(out, r.span_id);
  }
  *out += '}';
}

}  // namespace

AccessLog::AccessLog(double sample_rate, bool json_log)
    : sampler_(sample_rate),
      json_log_(json_log),
      logger_(std::make_shared<spdlog::logger>("access", std::make_shared<spdlog::sinks::stdout_sink_mt>())) {
  logger_->set_pattern("%v");
  logger_->set_level(spdlog::level::info);
  logger_->flush_on(spdlog::level::info);
}

AccessLog::~AccessLog() = default;

std::string AccessLog::Format(const AccessLogRecord& r, int64_t unix_ms) {
  std::string out;
  out.reserve(256);
  out += "{\"time\":";
  JsonWriter::AppendQuoted(&out, IsoTime(unix_ms));
  AppendFields(r, &out);
  return out;
}

std::string AccessLog::FormatJsonLogLine(const AccessLogRecord& r, std::chrono::system_clock::time_point time,
                                         size_t thread) {
  std::string out;
  out.reserve(320);
  out += "{\"time\":\"";
  common::AppendRfc3339Micros(time, &out);
  out += "\",\"level\":\"INFO\",\"thread\":" + std::to_string(thread) + ",\"message\":\"access\"";
  AppendFields(r, &out);
  return out;
}

void AccessLog::Write(const AccessLogRecord& record) {
  if (!sampler_.Take()) return;
  if (json_log_) {
    logger_->info(FormatJsonLogLine(record, std::chrono::system_clock::now(), spdlog::details::os::thread_id()));
    return;
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  logger_->info(Format(record, now_ms));
}

}  // namespace ortserve::metrics

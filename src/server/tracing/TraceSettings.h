#pragma once
// Triton's trace settings (docs/protocol/extension_trace.md) driving
// ortserve's OpenTelemetry tracing at run time: a global setting and, per
// model, a setting whose fields each either are the model's own or follow the
// global one. Both front ends read and change them (HTTP
// /v2[/models/<m>]/trace/setting, gRPC TraceSetting); RequestTracer asks them
// whether a request is traced.
//
//   trace_level    OFF (no request is traced, whatever its traceparent), or
//                  TIMESTAMPS and/or TENSORS (traced; ortserve's spans carry
//                  timestamps only, TENSORS is accepted and reported)
//   trace_rate     1 of every N requests without a traceparent starts a trace
//                  (counted per setting); 0: only traceparents start traces
//   trace_count    traces the rate may still start (-1: no limit); each one
//                  started counts it down, and at 0 only traceparents start
//                  traces. A valid traceparent decides for its request (its
//                  sampled flag) and counts against neither rate nor count.
//   log_frequency  accepted and kept; no meaning for OTLP export (Triton's
//                  OpenTelemetry mode does not report it either)
//
// Clearing a field (JSON null, an empty gRPC value) makes a model's field
// follow the global one again, and the global one return to its startup
// value; a model setting left with no field of its own is removed. Every
// change starts its setting's (and its followers') rate counter afresh; a
// count of a setting's own carries on, as in Triton. Thread-safe.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"

namespace ortserve::tracing {

// Triton's trace level bits; 0 is OFF.
inline constexpr uint32_t kTraceLevelOff = 0;
inline constexpr uint32_t kTraceLevelTimestamps = 1;
inline constexpr uint32_t kTraceLevelTensors = 2;

struct TraceSettingValues {
  uint32_t level = kTraceLevelOff;
  uint32_t rate = 1000;
  int32_t count = -1;  // traces left to start by rate; -1: unlimited
  uint32_t log_frequency = 0;
};

// ["OFF"], or the levels set, in Triton's order.
std::vector<std::string> TraceLevelNames(uint32_t level);

// One field of a change: left as it is, set, or cleared.
template <typename T>
struct TraceFieldChange {
  enum Kind { kKeep, kSet, kClear } kind = kKeep;
  T value{};
};

struct TraceSettingsChange {
  TraceFieldChange<uint32_t> level;
  TraceFieldChange<uint32_t> rate;
  TraceFieldChange<int32_t> count;
  TraceFieldChange<uint32_t> log_frequency;
};

// Adds the setting `key` with `values` (nullopt: clear it) to `change`, with
// Triton's rules and words: trace_level is OFF alone or TIMESTAMPS/TENSORS;
// the others are one decimal integer (trace_rate and log_frequency in
// [0, 2^32), trace_count >= -1). trace_file cannot change at run time
// (kUnsupported); an unknown key is kInvalidArgument naming the known ones.
// Both front ends parse with it.
Status AddTraceSettingChange(std::string_view key, const std::optional<std::vector<std::string_view>>& values,
                             TraceSettingsChange* change);

// The sampling state of one setting: its values, the requests it has seen
// and the traces it may still start.
class TraceSampler {
 public:
  explicit TraceSampler(const TraceSettingValues& values);
  bool enabled() const { return values_.level != kTraceLevelOff; }
  // A request without a trace context: whether the rate and count start a
  // trace for it (and count it).
  bool SampleNew();
  // The values, with the count left.
  TraceSettingValues values() const;

 private:
  const TraceSettingValues values_;
  std::atomic<uint64_t> seen_{0};
  std::atomic<int32_t> remaining_;
};

class TraceSettings {
 public:
  // `defaults`: the global setting at startup (what clearing returns it to).
  // `exporting`: spans go to a collector (at `collector_url`, reported as
  // Triton reports its OpenTelemetry url); without one a level other than
  // OFF is refused.
  TraceSettings(const TraceSettingValues& defaults, bool exporting, std::string collector_url = {});
  // --trace-sample-rate's fraction as Triton's rate: 1 of every
  // round(1/fraction) requests (0: none).
  static uint32_t RateForFraction(double fraction);

  bool exporting() const { return exporting_; }
  const std::string& collector_url() const { return collector_url_; }
  // The setting a request to `model` follows. Any thread, per request.
  std::shared_ptr<TraceSampler> SamplerFor(std::string_view model) const;
  // The setting of `model` (empty: the global one), count as left now.
  TraceSettingValues Get(std::string_view model) const;
  // Applies `change` to `model`'s setting (empty: the global one); returns the
  // setting after it. kInvalidArgument when it would turn tracing on without
  // a collector.
  Result<TraceSettingValues> Update(std::string_view model, const TraceSettingsChange& change);

 private:
  // A setting's own fields (those not set follow the fallback).
  struct Own {
    std::optional<uint32_t> level;
    std::optional<uint32_t> rate;
    std::optional<int32_t> count;
    std::optional<uint32_t> log_frequency;
    bool empty() const { return !level && !rate && !count && !log_frequency; }
    bool complete() const { return level && rate && count && log_frequency; }
    TraceSettingValues Over(const TraceSettingValues& fallback) const;
  };
  struct Scope {
    Own own;
    std::shared_ptr<TraceSampler> sampler;
  };

  static Own Changed(const Own& own, const TraceSettingsChange& change);
  // The scope's own fields with its count as left now (a count carries on
  // through changes of other fields, as in Triton).
  static Own Carried(const Scope& scope);
  std::shared_ptr<TraceSampler> Lookup(std::string_view model) const;  // mu_ held

  const TraceSettingValues defaults_;
  const bool exporting_;
  const std::string collector_url_;
  mutable std::mutex mu_;
  Scope global_;                                   // guarded by mu_
  std::map<std::string, Scope, std::less<>> models_;  // guarded by mu_
};

}  // namespace ortserve::tracing

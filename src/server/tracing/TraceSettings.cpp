#include "server/tracing/TraceSettings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace ortserve::tracing {
namespace {

std::string Shown(std::string_view s) { return std::string(s.substr(0, 64)); }

// A whole decimal integer in [min, max], with Triton's words for what is not.
template <typename T>
Result<T> ParseInteger(std::string_view key, std::string_view text, int64_t min, int64_t max) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && end == text.data() + text.size() &&
                                               (v < min || v > max))) {
    if (min < 0) {
      return InvalidArgument("Unable to parse '" + std::string(key) + "'. Expecting value >= " +
                             std::to_string(min) + " and <= " + std::to_string(max) + ", got:" + Shown(text));
    }
    return InvalidArgument("Unable to parse '" + std::string(key) + "', value is out of range [ " +
                           std::to_string(min) + ", " + std::to_string(max) + " ], got: " + Shown(text));
  }
  if (ec != std::errc() || end != text.data() + text.size())
    return InvalidArgument("Unable to parse '" + std::string(key) + "', got: " + Shown(text));
  return static_cast<T>(v);
}

Result<uint32_t> ParseLevel(const std::vector<std::string_view>& names) {
  uint32_t level = kTraceLevelOff;
  for (std::string_view name : names) {
    if (name == "OFF") {
      if (names.size() != 1) return InvalidArgument("Expect only one trace level 'OFF' is specified");
    } else if (name == "TIMESTAMPS") {
      level |= kTraceLevelTimestamps;
    } else if (name == "TENSORS") {
      level |= kTraceLevelTensors;
    } else {
      return InvalidArgument("unknown trace level '" + Shown(name) + "' (expected OFF, TIMESTAMPS or TENSORS)");
    }
  }
  return level;
}

template <typename T>
void Clear(TraceFieldChange<T>* field) {
  field->kind = TraceFieldChange<T>::kClear;
}
template <typename T>
void Set(TraceFieldChange<T>* field, T value) {
  field->kind = TraceFieldChange<T>::kSet;
  field->value = value;
}

template <typename T>
std::optional<T> Applied(const std::optional<T>& own, const TraceFieldChange<T>& change) {
  switch (change.kind) {
    case TraceFieldChange<T>::kSet: return change.value;
    case TraceFieldChange<T>::kClear: return std::nullopt;
    case TraceFieldChange<T>::kKeep: break;
  }
  return own;
}

}  // namespace

std::vector<std::string> TraceLevelNames(uint32_t level) {
  if (level == kTraceLevelOff) return {"OFF"};
  std::vector<std::string> names;
  if (level & kTraceLevelTimestamps) names.emplace_back("TIMESTAMPS");
  if (level & kTraceLevelTensors) names.emplace_back("TENSORS");
  return names;
}

Status AddTraceSettingChange(std::string_view key, const std::optional<std::vector<std::string_view>>& values,
                             TraceSettingsChange* change) {
  if (key == "trace_file") return Unsupported("trace file location can not be updated through network protocol");
  const bool known = key == "trace_level" || key == "trace_rate" || key == "trace_count" || key == "log_frequency";
  if (!known) {
    return InvalidArgument("unknown trace setting '" + Shown(key) +
                           "' (known: trace_level, trace_rate, trace_count, log_frequency, trace_file)");
  }
  if (!values) {
    if (key == "trace_level") Clear(&change->level);
    if (key == "trace_rate") Clear(&change->rate);
    if (key == "trace_count") Clear(&change->count);
    if (key == "log_frequency") Clear(&change->log_frequency);
    return Status::Ok();
  }
  if (key == "trace_level") {
    if (values->empty()) return InvalidArgument("'trace_level' needs OFF, TIMESTAMPS or TENSORS");
    auto level = ParseLevel(*values);
    if (!level.ok()) return level.status();
    Set(&change->level, *level);
    return Status::Ok();
  }
  if (values->size() != 1) return InvalidArgument("expect only 1 value for '" + std::string(key) + "'");
  const std::string_view text = values->front();
  constexpr int64_t kU32Max = std::numeric_limits<uint32_t>::max();
  if (key == "trace_count") {
    auto count = ParseInteger<int32_t>(key, text, -1, std::numeric_limits<int32_t>::max());
    if (!count.ok()) return count.status();
    Set(&change->count, *count);
    return Status::Ok();
  }
  auto value = ParseInteger<uint32_t>(key, text, 0, kU32Max);
  if (!value.ok()) return value.status();
  Set(key == "trace_rate" ? &change->rate : &change->log_frequency, *value);
  return Status::Ok();
}

TraceSampler::TraceSampler(const TraceSettingValues& values) : values_(values), remaining_(values.count) {}

bool TraceSampler::SampleNew() {
  if (values_.rate == 0) return false;
  if (seen_.fetch_add(1, std::memory_order_relaxed) % values_.rate != values_.rate - 1) return false;
  int32_t left = remaining_.load(std::memory_order_relaxed);
  while (left != 0) {
    if (left < 0) return true;  // unlimited
    if (remaining_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

TraceSettingValues TraceSampler::values() const {
  TraceSettingValues v = values_;
  v.count = remaining_.load(std::memory_order_relaxed);
  return v;
}

TraceSettings::TraceSettings(const TraceSettingValues& defaults, bool exporting, std::string collector_url)
    : defaults_(defaults), exporting_(exporting), collector_url_(std::move(collector_url)) {
  global_.sampler = std::make_shared<TraceSampler>(defaults_);
}

uint32_t TraceSettings::RateForFraction(double fraction) {
  if (!(fraction > 0)) return 0;
  const double every = std::round(1.0 / fraction);
  return every >= static_cast<double>(std::numeric_limits<uint32_t>::max())
             ? std::numeric_limits<uint32_t>::max()
             : static_cast<uint32_t>(std::max(1.0, every));
}

TraceSettingValues TraceSettings::Own::Over(const TraceSettingValues& fallback) const {
  return {.level = level.value_or(fallback.level),
          .rate = rate.value_or(fallback.rate),
          .count = count.value_or(fallback.count),
          .log_frequency = log_frequency.value_or(fallback.log_frequency)};
}

TraceSettings::Own TraceSettings::Changed(const Own& own, const TraceSettingsChange& change) {
  return {.level = Applied(own.level, change.level),
          .rate = Applied(own.rate, change.rate),
          .count = Applied(own.count, change.count),
          .log_frequency = Applied(own.log_frequency, change.log_frequency)};
}

TraceSettings::Own TraceSettings::Carried(const Scope& scope) {
  Own own = scope.own;
  if (own.count) own.count = scope.sampler->values().count;
  return own;
}

std::shared_ptr<TraceSampler> TraceSettings::Lookup(std::string_view model) const {
  if (!model.empty() && !models_.empty()) {
    if (auto it = models_.find(model); it != models_.end()) return it->second.sampler;
  }
  return global_.sampler;
}

std::shared_ptr<TraceSampler> TraceSettings::SamplerFor(std::string_view model) const {
  std::lock_guard lock(mu_);
  return Lookup(model);
}

TraceSettingValues TraceSettings::Get(std::string_view model) const {
  std::lock_guard lock(mu_);
  return Lookup(model)->values();
}

Result<TraceSettingValues> TraceSettings::Update(std::string_view model, const TraceSettingsChange& change) {
  std::lock_guard lock(mu_);
  const bool global = model.empty();
  auto found = global ? models_.end() : models_.find(model);
  const Own own = Changed(global ? Carried(global_) : found != models_.end() ? Carried(found->second) : Own{},
                         change);
  const TraceSettingValues global_values = global ? own.Over(defaults_) : global_.own.Over(defaults_);
  const TraceSettingValues values = global ? global_values : own.Over(global_values);
  if (!exporting_ && values.level != kTraceLevelOff) {
    return InvalidArgument("tracing needs an OpenTelemetry collector: start ortserve with --trace-otlp-endpoint "
                           "to set a trace_level other than OFF");
  }
  if (!global) {
    if (own.empty()) {
      if (found != models_.end()) models_.erase(found);
      return global_.sampler->values();
    }
    models_.insert_or_assign(std::string(model), Scope{own, std::make_shared<TraceSampler>(values)});
    return values;
  }
  // A model setting whose every field is its own keeps its counters; the
  // others follow the new global values with fresh ones.
  global_ = Scope{own, std::make_shared<TraceSampler>(global_values)};
  for (auto& [name, scope] : models_) {
    if (scope.own.complete()) continue;
    scope.own = Carried(scope);
    scope.sampler = std::make_shared<TraceSampler>(scope.own.Over(global_values));
  }
  return global_values;
}

}  // namespace ortserve::tracing

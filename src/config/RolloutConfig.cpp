#include "config/RolloutConfig.h"

#include <string_view>

#include "config/ParameterError.h"
#include "core/Text.h"

namespace ortserve {
namespace {

template <typename T>
Result<std::vector<T>> ParseList(const std::string& key, const std::string& text, const char* expected) {
  std::vector<T> out;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    auto v = ParseNumber<T>(rest.substr(0, comma));
    if (!v) {
      return BadParameterValue(key, text, "item '" + std::string(TrimBlanks(rest.substr(0, comma))) +
                                              "' is not a number (expected " + expected + ")");
    }
    out.push_back(*v);
    if (comma == std::string_view::npos) return out;
    rest.remove_prefix(comma + 1);
  }
}

Status ParseSteps(const std::string& text, RolloutConfig* out) {
  auto steps = ParseList<int>(kRolloutStepsParameter, text, "percentages such as \"5,20,50,100\"");
  if (!steps.ok()) return steps.status();
  int previous = 0;
  for (size_t i = 0; i < steps->size(); ++i) {
    const int s = (*steps)[i];
    if (s < 1 || s > 100) return BadParameterValue(kRolloutStepsParameter, text, "each step must be a percent from 1 to 100");
    if (s <= previous) return BadParameterValue(kRolloutStepsParameter, text, "steps must be strictly increasing");
    previous = s;
    if (s < 100) out->steps.push_back(s);
  }
  if (out->steps.empty()) return BadParameterValue(kRolloutStepsParameter, text, "needs at least one step below 100");
  return Status::Ok();
}

Status ParseStepSeconds(const std::string& text, RolloutConfig* out) {
  auto seconds = ParseList<double>(kRolloutStepSecondsParameter, text, "seconds such as \"300\" or \"300,600,600\"");
  if (!seconds.ok()) return seconds.status();
  for (double s : *seconds) {
    if (!(s > 0) || s > 86400.0 * 365) return BadParameterValue(kRolloutStepSecondsParameter, text, "each value must be > 0 seconds");
  }
  const size_t steps = out->steps.size();
  if (seconds->size() == 1) {
    out->step_seconds.assign(steps, seconds->front());
  } else if (seconds->size() == steps) {
    out->step_seconds = std::move(seconds).value();
  } else {
    return BadParameterValue(kRolloutStepSecondsParameter, text,
               "needs one value or one per step below 100 (" + std::to_string(steps) + "), has " +
                   std::to_string(seconds->size()));
  }
  return Status::Ok();
}

Result<double> ParsePositive(const std::string& key, const std::string& text, double max) {
  auto v = ParseNumber<double>(text);
  if (!v || !(*v > 0) || *v > max) {
    return BadParameterValue(key, text, "must be a number > 0 and <= " + std::to_string(static_cast<int64_t>(max)));
  }
  return *v;
}

}  // namespace

bool IsRolloutParameter(const std::string& key) {
  return key == kRolloutStepsParameter || key == kRolloutStepSecondsParameter ||
         key == kRolloutMinRequestsParameter || key == kRolloutMaxP95MsParameter ||
         key == kRolloutMaxErrorRateParameter || key == kRolloutMaxP95RatioParameter;
}

Result<std::optional<RolloutConfig>> RolloutConfig::FromConfig(const inference::ModelConfig& config) {
  return FromParameters(config.parameters());
}

Result<std::optional<RolloutConfig>> RolloutConfig::FromParameters(
    const google::protobuf::Map<std::string, inference::ModelParameter>& parameters) {
  bool any = false;
  for (const auto& [key, value] : parameters) any |= IsRolloutParameter(key);
  if (!any) return std::optional<RolloutConfig>();
  auto get = [&](const char* key) -> const std::string* {
    auto it = parameters.find(key);
    return it == parameters.end() ? nullptr : &it->second.string_value();
  };
  RolloutConfig out;
  const std::string* steps = get(kRolloutStepsParameter);
  if (!steps) return InvalidArgument(std::string("parameter '") + kRolloutStepsParameter + "' is required by a rollout");
  ORTSERVE_RETURN_IF_ERROR(ParseSteps(*steps, &out));
  const std::string* seconds = get(kRolloutStepSecondsParameter);
  if (!seconds) {
    return InvalidArgument(std::string("parameter '") + kRolloutStepSecondsParameter + "' is required by a rollout");
  }
  ORTSERVE_RETURN_IF_ERROR(ParseStepSeconds(*seconds, &out));
  if (const std::string* t = get(kRolloutMinRequestsParameter)) {
    auto v = ParseNumber<uint64_t>(*t);
    if (!v || *v < 1 || *v > 1'000'000'000) {
      return BadParameterValue(kRolloutMinRequestsParameter, *t, "must be a whole number from 1 to 1000000000");
    }
    out.min_requests = *v;
  }
  if (const std::string* t = get(kRolloutMaxP95MsParameter)) {
    auto v = ParsePositive(kRolloutMaxP95MsParameter, *t, 3'600'000);
    if (!v.ok()) return v.status();
    out.max_p95_ms = *v;
  }
  if (const std::string* t = get(kRolloutMaxErrorRateParameter)) {
    auto v = ParseNumber<double>(*t);
    if (!v || *v < 0 || *v > 1) return BadParameterValue(kRolloutMaxErrorRateParameter, *t, "must be a fraction from 0 to 1");
    out.max_error_rate = *v;
  }
  if (const std::string* t = get(kRolloutMaxP95RatioParameter)) {
    auto v = ParsePositive(kRolloutMaxP95RatioParameter, *t, 1000);
    if (!v.ok()) return v.status();
    out.max_p95_ratio = *v;
  }
  if (!out.max_p95_ms && !out.max_error_rate && !out.max_p95_ratio) {
    return InvalidArgument(std::string("a rollout needs at least one threshold: parameter '") +
                           kRolloutMaxP95MsParameter + "', '" + kRolloutMaxErrorRateParameter + "' or '" +
                           kRolloutMaxP95RatioParameter + "'");
  }
  return std::optional<RolloutConfig>(std::move(out));
}

}  // namespace ortserve

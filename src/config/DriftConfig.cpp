#include "config/DriftConfig.h"

#include <string_view>

#include "config/ModelFiles.h"
#include "config/ParameterError.h"
#include "core/Text.h"

namespace ortserve {

bool IsDriftParameter(const std::string& key) {
  return key == kDriftBaselineRequestsParameter || key == kDriftReferenceParameter || key == kDriftBinsParameter ||
         key == kDriftSampleFractionParameter;
}

Result<std::optional<DriftConfig>> DriftConfig::FromConfig(const inference::ModelConfig& config) {
  const auto& parameters = config.parameters();
  auto get = [&](const char* key) -> const std::string* {
    auto it = parameters.find(key);
    return it == parameters.end() ? nullptr : &it->second.string_value();
  };
  const std::string* baseline = get(kDriftBaselineRequestsParameter);
  const std::string* reference = get(kDriftReferenceParameter);
  const std::string* bins = get(kDriftBinsParameter);
  const std::string* fraction = get(kDriftSampleFractionParameter);
  if (!baseline && !reference && !bins && !fraction) return std::optional<DriftConfig>();
  if (baseline && reference) {
    return InvalidArgument(std::string("parameters '") + kDriftBaselineRequestsParameter + "' and '" +
                           kDriftReferenceParameter + "' exclude each other: record a reference or load one");
  }
  if (!baseline && !reference) {
    if (bins) {
      return InvalidArgument(std::string("parameter '") + kDriftBinsParameter + "' needs '" +
                             kDriftBaselineRequestsParameter + "' (drift statistics are off without it)");
    }
    return InvalidArgument(std::string("parameter '") + kDriftSampleFractionParameter + "' needs '" +
                           kDriftBaselineRequestsParameter + "' or '" + kDriftReferenceParameter +
                           "' (drift statistics are off without one of them)");
  }
  DriftConfig out;
  if (baseline) {
    auto v = ParseNumber<uint64_t>(*baseline);
    if (!v || *v < 1 || *v > 1'000'000'000) {
      return BadParameterValue(kDriftBaselineRequestsParameter, *baseline, "must be a whole number from 1 to 1000000000");
    }
    out.baseline_requests = *v;
  }
  if (reference) {
    if (Status inside = CheckRelativeInside(*reference, "the model folder"); !inside.ok()) {
      return BadParameterValue(kDriftReferenceParameter, *reference, inside.message());
    }
    if (bins) {
      return InvalidArgument(std::string("parameter '") + kDriftBinsParameter + "' cannot be used with '" +
                             kDriftReferenceParameter + "': the profile fixes the bins");
    }
    out.reference_path = *reference;
  }
  if (bins) {
    auto v = ParseNumber<uint64_t>(*bins);
    if (!v || *v < 2 || *v > static_cast<uint64_t>(kDriftMaxBins)) {
      return BadParameterValue(kDriftBinsParameter, *bins, "must be a whole number from 2 to " + std::to_string(kDriftMaxBins));
    }
    out.bins = static_cast<int>(*v);
  }
  if (fraction) {
    auto v = ParseNumber<double>(*fraction);  // refuses inf and NaN
    if (!v || !(*v > 0.0 && *v <= 1.0)) {
      return BadParameterValue(kDriftSampleFractionParameter, *fraction, "must be above 0 and at most 1");
    }
    out.sample_fraction = *v;
  }
  return std::optional<DriftConfig>(std::move(out));
}

}  // namespace ortserve

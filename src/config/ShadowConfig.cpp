#include "config/ShadowConfig.h"

#include "config/ParameterError.h"
#include "core/Text.h"

namespace ortserve {

bool IsShadowParameter(const std::string& key) {
  return key == kShadowVersionParameter || key == kShadowFractionParameter || key == kShadowToleranceParameter;
}

Result<std::optional<ShadowConfig>> ShadowConfig::FromConfig(const inference::ModelConfig& config) {
  ShadowConfig out;
  bool any = false, has_version = false, has_fraction = false;
  for (const auto& [key, value] : config.parameters()) {
    if (!IsShadowParameter(key)) continue;
    any = true;
    const std::string& text = value.string_value();
    if (key == kShadowVersionParameter) {
      const std::optional<int64_t> v = ParseNumber<int64_t>(text);
      if (!v || *v < 1) return BadParameterValue(key, text, "must be a version number (an integer >= 1)");
      out.version = *v;
      has_version = true;
      continue;
    }
    const std::optional<double> v = ParseNumber<double>(text);
    if (!v) return BadParameterValue(key, text, "not a number");  // ParseNumber refuses inf and NaN
    if (key == kShadowFractionParameter) {
      if (!(*v > 0.0 && *v <= 1.0)) return BadParameterValue(key, text, "must be above 0 and at most 1");
      out.fraction = *v;
      has_fraction = true;
    } else {
      if (*v < 0.0) return BadParameterValue(key, text, "must be >= 0");
      out.tolerance = *v;
    }
  }
  if (!any) return std::optional<ShadowConfig>();
  if (!has_version) {
    return InvalidArgument(std::string("parameters shadow_fraction and shadow_tolerance need parameter '") +
                           kShadowVersionParameter + "' (the version the requests are also run on)");
  }
  if (!has_fraction) {
    return InvalidArgument(std::string("parameter 'shadow_version' needs parameter '") + kShadowFractionParameter +
                           "' (the share of requests to shadow, above 0 and at most 1)");
  }
  return std::optional<ShadowConfig>(out);
}

}  // namespace ortserve

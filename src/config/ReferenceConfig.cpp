#include "config/ReferenceConfig.h"

#include <fmt/format.h>

#include <cmath>

#include "core/Text.h"

namespace ortserve {
namespace {

Status Bad(const std::string& key, const std::string& text, const std::string& why) {
  return InvalidArgument("parameter '" + key + "' value '" + text + "': " + why);
}

// A finite number in [low, high], or why not (naming the parameter).
Result<double> ParseBounded(const std::string& key, const std::string& text, double low, double high) {
  const std::optional<double> parsed = ParseNumber<double>(text);
  if (!parsed) return Bad(key, text, "not a number");
  const double v = *parsed;
  if (v < low || v > high) {
    return Bad(key, text, std::isinf(high) ? fmt::format("must be >= {:g}", low)
                                           : fmt::format("must be from {:g} to {:g}", low, high));
  }
  return v;
}

// A plain name: no separator, not "." or "..".
Status CheckPlainName(const std::string& key, const std::string& text, const char* where) {
  if (text.empty() || text.find('/') != std::string::npos || text.find('\\') != std::string::npos ||
      text == "." || text == "..") {
    return Bad(key, text, std::string("must be a file name inside the ") + where);
  }
  return Status::Ok();
}

}  // namespace

bool IsReferenceParameter(const std::string& key) {
  return key == kReferenceModelParameter || key == kReferenceSamplesParameter ||
         key == kReferenceMinAgreementParameter || key == kReferenceToleranceParameter;
}

Result<std::optional<ReferenceConfig>> ReferenceConfig::FromConfig(const inference::ModelConfig& config) {
  ReferenceConfig out;
  bool any = false;
  for (const auto& [key, value] : config.parameters()) {
    if (!IsReferenceParameter(key)) continue;
    any = true;
    const std::string& text = value.string_value();
    if (key == kReferenceModelParameter) {
      ORTSERVE_RETURN_IF_ERROR(CheckPlainName(key, text, "version folder"));
      out.model_file = text;
    } else if (key == kReferenceSamplesParameter) {
      ORTSERVE_RETURN_IF_ERROR(CheckPlainName(key, text, "model folder"));
      out.samples_dir = text;
    } else if (key == kReferenceMinAgreementParameter) {
      auto v = ParseBounded(key, text, 0.0, 1.0);
      if (!v.ok()) return v.status();
      out.min_agreement = *v;
    } else {
      auto v = ParseBounded(key, text, 0.0, HUGE_VAL);
      if (!v.ok()) return v.status();
      out.tolerance = *v;
    }
  }
  if (!any) return std::optional<ReferenceConfig>();
  if (out.model_file.empty()) {
    return InvalidArgument(std::string("parameters reference_samples, reference_tolerance and ") +
                           "reference_min_agreement need parameter 'reference_model' (the reference model file)");
  }
  if (!out.tolerance && !out.min_agreement) {
    return InvalidArgument("parameter 'reference_model' needs a threshold: 'reference_tolerance' and/or "
                           "'reference_min_agreement'");
  }
  return std::optional<ReferenceConfig>(std::move(out));
}

}  // namespace ortserve

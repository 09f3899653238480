#include "config/ReferenceConfig.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "config/ParameterError.h"
#include "core/Text.h"

namespace ortserve {
namespace {

// A finite number in [low, high], or why not (naming the parameter).
Result<double> ParseBounded(const std::string& key, const std::string& text, double low, double high) {
  const std::optional<double> parsed = ParseNumber<double>(text);
  if (!parsed) return BadParameterValue(key, text, "not a number");
  const double v = *parsed;
  if (v < low || v > high) {
    return BadParameterValue(key, text, std::isinf(high) ? fmt::format("must be >= {:g}", low)
                                           : fmt::format("must be from {:g} to {:g}", low, high));
  }
  return v;
}

// A plain name: no separator, not "." or "..".
Status CheckPlainName(const std::string& key, const std::string& text, const char* where) {
  if (text.empty() || text.find('/') != std::string::npos || text.find('\\') != std::string::npos ||
      text == "." || text == "..") {
    return BadParameterValue(key, text, std::string("must be a file name inside the ") + where);
  }
  return Status::Ok();
}

// "model:<name>[/<version>]" into `out`, or why not (naming reference_model).
Status ParseModelReference(const inference::ModelConfig& config, const std::string& text, ReferenceConfig* out) {
  const std::string key = kReferenceModelParameter;
  std::string rest = text.substr(std::strlen(kReferenceModelPrefix));
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    const std::string version = rest.substr(slash + 1);
    const std::optional<int64_t> v = ParseNumber<int64_t>(version);
    if (!v || *v <= 0 || version.find_first_not_of("0123456789") != std::string::npos) {
      return BadParameterValue(key, text, "the version after '/' must be a positive integer (model:<name>/<version>)");
    }
    out->model_version = *v;
    rest.resize(slash);
  }
  if (rest.empty() || rest[0] == '.' || rest.find('\\') != std::string::npos) {
    return BadParameterValue(key, text, "must be model:<name> or model:<name>/<version>, <name> a model directory of the repository");
  }
  if (rest == config.name()) {
    return BadParameterValue(key, text, "names the model itself; a reference file of the version folder is named without 'model:'");
  }
  out->model_name = rest;
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
    if (key == kReferenceModelParameter && text.rfind(kReferenceModelPrefix, 0) == 0) {
      ORTSERVE_RETURN_IF_ERROR(ParseModelReference(config, text, &out));
    } else if (key == kReferenceModelParameter) {
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
  if (out.model_file.empty() && out.model_name.empty()) {
    return InvalidArgument(std::string("parameters reference_samples, reference_tolerance and ") +
                           "reference_min_agreement need parameter 'reference_model' (the reference model file, "
                           "or model:<name>)");
  }
  if (!out.tolerance && !out.min_agreement) {
    return InvalidArgument("parameter 'reference_model' needs a threshold: 'reference_tolerance' and/or "
                           "'reference_min_agreement'");
  }
  return std::optional<ReferenceConfig>(std::move(out));
}

std::string ReferenceConfig::Describe() const {
  if (model_name.empty()) return "'" + model_file + "'";
  return "model '" + model_name + "'" + (model_version > 0 ? " version " + std::to_string(model_version) : "");
}

}  // namespace ortserve

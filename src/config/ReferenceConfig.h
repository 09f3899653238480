#pragma once
// Reference check at load (docs/model-config.md, "Reference check"): a
// quantized or otherwise optimized version is compared, before it becomes
// READY, with a reference model: a file of the same version folder, or
// another model of the repository ("model:<name>", "model:<name>/<version>"):
//   parameters { key: "reference_model"         value { string_value: "model_fp32.onnx" } }
//   parameters { key: "reference_tolerance"     value { string_value: "0.05" } }
//   parameters { key: "reference_min_agreement" value { string_value: "0.99" } }
//   parameters { key: "reference_samples"       value { string_value: "reference" } }  (optional)
// The check itself is repository/ReferenceCheck.h.
#include <cstdint>
#include <optional>
#include <string>

#include "core/Status.h"
#include "model_config.pb.h"

namespace ortserve {

inline constexpr const char* kReferenceModelParameter = "reference_model";
inline constexpr const char* kReferenceSamplesParameter = "reference_samples";
inline constexpr const char* kReferenceMinAgreementParameter = "reference_min_agreement";
inline constexpr const char* kReferenceToleranceParameter = "reference_tolerance";

// True for the four keys above.
bool IsReferenceParameter(const std::string& key);

// The prefix that makes reference_model name another model rather than a file.
inline constexpr const char* kReferenceModelPrefix = "model:";

struct ReferenceConfig {
  // A file name inside the version folder (no '/', not "." or ".."); empty
  // when reference_model names another model.
  std::string model_file;
  // "model:<name>" or "model:<name>/<version>": another model of the same
  // repository (a model directory name: not hidden, no separator; not the
  // model itself), its newest READY version (model_version 0) or the one
  // named (> 0). Empty for a file.
  std::string model_name;
  int64_t model_version = 0;
  // A folder name inside the model folder holding one <input>.npy per
  // input; empty: the warm-up samples are the inputs.
  std::string samples_dir;
  // Top-1 agreement over the rows of every floating-point output with a
  // class dimension, in [0, 1].
  std::optional<double> min_agreement;
  // Largest |served - reference| allowed over every floating-point element, >= 0.
  std::optional<double> tolerance;

  // nullopt when the config sets no reference_* key. kInvalidArgument naming
  // the parameter for a malformed or out-of-range value, for thresholds or
  // samples without reference_model, and for reference_model without any
  // threshold.
  static Result<std::optional<ReferenceConfig>> FromConfig(const inference::ModelConfig& config);

  // What reference_model names, for messages: the file, or "model 'b'" / "model 'b' version 2".
  std::string Describe() const;
};

}  // namespace ortserve

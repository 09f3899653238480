#pragma once
// Reference check at load (config/ReferenceConfig.h): before a version with
// reference_model becomes READY, its inputs (the warm-up samples, or the
// reference_samples folder) run on one of its instances and on a private CPU
// session of the reference file: a file of its version folder, or the model
// file of the READY version of the model "model:<name>" names (a session of
// its own, so the check neither queues behind nor counts in that model's
// traffic and statistics); every output is compared with the GPU numerical
// check's code (runtime/NumericalComparison.h): the largest absolute
// difference against reference_tolerance, the top-1 agreement of outputs with
// a class dimension against reference_min_agreement. Non-floating outputs
// must match exactly.
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "core/Status.h"
#include "repository/ModelPreparation.h"
#include "repository/Warmup.h"
#include "runtime/ModelInstance.h"

namespace ortserve {

// A READY model as the check finds it: its complete config and version.
struct ReferencedModel {
  inference::ModelConfig config;
  int64_t version = 0;
};
// `version` 0: the newest READY version. nullopt: none READY (or loadable,
// in the offline check).
using FindReferencedModel = std::function<std::optional<ReferencedModel>(const std::string& name, int64_t version)>;

// The part of the check that needs no session, before any is made: the file
// the version is compared with -- for a file reference the file in its
// version folder, for "model:<name>" the model file of the READY version
// `find` gives (looked up here, once per load) -- or nullopt when the config
// has no reference_model. For "model:<name>", kUnavailable naming
// reference_model and the model when it is not READY or does not take this
// model's inputs and give its outputs (config/ConfigChecks.h's
// CheckReferenceCompatible).
Result<std::optional<std::filesystem::path>> FindReferenceFile(const Candidate& c, const FindReferencedModel& find);
// FindReferenceFile's verdict without the file (the offline check).
Status CheckReferencedModel(const Candidate& c, const FindReferencedModel& find);

// Ok when `reference_file` (FindReferenceFile's) is nullopt or the version
// agrees with it; kUnavailable otherwise, the reason giving for each failing
// output its max abs difference, its agreement and the thresholds.
Status CheckAgainstReference(const Candidate& c, ModelInstance& served, const std::vector<WarmupSample>& warmup,
                             const std::optional<std::filesystem::path>& reference_file);

}  // namespace ortserve

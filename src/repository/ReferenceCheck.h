#pragma once
// Reference check at load (config/ReferenceConfig.h): before a version with
// reference_model becomes READY, its inputs (the warm-up samples, or the
// reference_samples folder) run on one of its instances and on a CPU session
// of the reference file; every output is compared with the GPU numerical
// check's code (runtime/NumericalComparison.h): the largest absolute
// difference against reference_tolerance, the top-1 agreement of outputs with
// a class dimension against reference_min_agreement. Non-floating outputs
// must match exactly.
#include <vector>

#include "core/Status.h"
#include "repository/ModelPreparation.h"
#include "repository/Warmup.h"
#include "runtime/ModelInstance.h"

namespace ortserve {

// Ok when the config has no reference_model or the version agrees with it;
// kUnavailable otherwise, the reason giving for each failing output its max
// abs difference, its agreement and the thresholds.
Status CheckAgainstReference(const Candidate& c, ModelInstance& served, const std::vector<WarmupSample>& warmup);

}  // namespace ortserve

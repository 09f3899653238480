#pragma once
// Checks of a completed model config: against what ortserve serves, against
// the model's signature, and between a model and its fallback. Every failure
// names the field or tensor and what was expected.
#include "core/Status.h"
#include "model_config.pb.h"
#include "runtime/ModelSignature.h"

namespace ortserve {

// Checks platform/backend and fills whichever is empty. Other platforms or
// backends fail with kUnavailable and the reason; an ensemble (platform
// "ensemble" or ensemble_scheduling) is checked by CheckEnsembleScheduling.
Status CheckPlatform(inference::ModelConfig* config);

// The config must describe the model: every config input/output exists in the
// model with the same type and compatible dims (-1 matches anything), every
// model input is in the config or fed by the server (sequence_batching's
// control and state inputs, checked by CheckSequenceTensors), a batching
// model has a dynamic first dim. kUnavailable naming the tensor otherwise.
Status ValidateConfigAgainstSignature(const inference::ModelConfig& config,
                                      const ModelSignature& signature);

// Whether `fallback` can serve every request `primary` accepts: the same
// inputs and outputs (names, data types, dims, in any order), batching on
// both or neither, and a max_batch_size at least the primary's. The message
// names the first difference.
Status CheckFallbackCompatible(const inference::ModelConfig& primary,
                               const inference::ModelConfig& fallback);

// Whether `reference` (a model reference_model names) takes the inputs and
// gives the outputs of `model`: the same names, data types and dims, in any
// order, and batching on both or neither. The message names the first
// difference ("it" is the reference).
Status CheckReferenceCompatible(const inference::ModelConfig& model, const inference::ModelConfig& reference);

}  // namespace ortserve

#pragma once
// Ragged batching's config side: what scheduler/RaggedBatch.h is told, made
// from the config's allow_ragged_batch, batch_input and batch_output (whose
// Triton rules ConfigRules.h checks), and their checks against the model.
#include <memory>

#include "core/Status.h"
#include "model_config.pb.h"
#include "runtime/ModelSignature.h"
#include "scheduler/RaggedBatch.h"

namespace ortserve {

// Null when the config uses none of the three.
std::shared_ptr<const RaggedBatching> MakeRaggedBatching(const inference::ModelConfig& config);

// Whether `name` is a batch input's target: a model input the server makes.
bool IsBatchInputTarget(const inference::ModelConfig& config, const std::string& name);
// Whether `name` is a batch output's target: an output scattered per request.
bool IsBatchOutputTarget(const inference::ModelConfig& config, const std::string& name);

// The rules that need the model: a ragged input is a 1-D [-1] model input
// (Triton's ONNX Runtime backend text); each batch input target is a model
// input of the configured data type; a batch output target's data type
// matches (its shape is the source input's, so only its type is checked);
// ragged batching runs under the dynamic batcher, not the sequence batcher.
// kUnavailable naming the tensor.
Status CheckRaggedAgainstModel(const inference::ModelConfig& config, const ModelSignature& signature);

}  // namespace ortserve

#include "config/RaggedConfig.h"

#include <algorithm>
#include <string>

#include "config/ConfigTypes.h"

namespace ortserve {
namespace {

BatchInputKind ToKind(inference::BatchInput::Kind kind) {
  switch (kind) {
    case inference::BatchInput::BATCH_ACCUMULATED_ELEMENT_COUNT:
      return BatchInputKind::kAccumulatedElementCount;
    case inference::BatchInput::BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO:
      return BatchInputKind::kAccumulatedElementCountWithZero;
    case inference::BatchInput::BATCH_MAX_ELEMENT_COUNT_AS_SHAPE:
      return BatchInputKind::kMaxElementCountAsShape;
    case inference::BatchInput::BATCH_ITEM_SHAPE:
      return BatchInputKind::kItemShape;
    case inference::BatchInput::BATCH_ITEM_SHAPE_FLATTEN:
      return BatchInputKind::kItemShapeFlatten;
    default:
      return BatchInputKind::kElementCount;
  }
}

std::string Loading(const inference::ModelConfig& config) {
  return "unable to load model '" + config.name() + "', ";
}

}  // namespace

std::shared_ptr<const RaggedBatching> MakeRaggedBatching(const inference::ModelConfig& config) {
  auto ragged = std::make_shared<RaggedBatching>();
  for (const auto& input : config.input()) {
    if (input.allow_ragged_batch()) ragged->ragged_inputs.push_back(input.name());
  }
  for (const auto& entry : config.batch_input()) {
    BatchInputSpec spec;
    spec.kind = ToKind(entry.kind());
    spec.targets.assign(entry.target_name().begin(), entry.target_name().end());
    spec.dtype = FromConfigDataType(entry.data_type());
    spec.source = entry.source_input(0);  // one source: ConfigRules
    ragged->batch_inputs.push_back(std::move(spec));
  }
  for (const auto& entry : config.batch_output()) {
    BatchOutputSpec spec;
    spec.targets.assign(entry.target_name().begin(), entry.target_name().end());
    spec.source = entry.source_input(0);
    ragged->batch_outputs.push_back(std::move(spec));
  }
  if (ragged->empty()) return nullptr;
  return ragged;
}

bool IsBatchInputTarget(const inference::ModelConfig& config, const std::string& name) {
  return std::any_of(config.batch_input().begin(), config.batch_input().end(), [&](const auto& entry) {
    return std::find(entry.target_name().begin(), entry.target_name().end(), name) != entry.target_name().end();
  });
}

bool IsBatchOutputTarget(const inference::ModelConfig& config, const std::string& name) {
  return std::any_of(config.batch_output().begin(), config.batch_output().end(), [&](const auto& entry) {
    return std::find(entry.target_name().begin(), entry.target_name().end(), name) != entry.target_name().end();
  });
}

Status CheckRaggedAgainstModel(const inference::ModelConfig& config, const ModelSignature& signature) {
  const auto ragged = MakeRaggedBatching(config);
  if (!ragged) return Status::Ok();
  if (config.has_sequence_batching()) {
    return Unavailable(Loading(config) +
                       "ragged batching (allow_ragged_batch, batch_input, batch_output) runs under the dynamic "
                       "batcher only; ortserve does not implement it with sequence_batching");
  }
  for (const auto& input : config.input()) {
    if (!input.allow_ragged_batch()) continue;
    const std::string& name = input.name();
    const TensorSignature* sig = FindTensor(signature.inputs, name);
    if (sig && FromConfigDataType(input.data_type()) != sig->dtype) {
      return Unavailable(Loading(config) + "ragged input '" + name + "' is " +
                         inference::DataType_Name(input.data_type()) + " in the config but " +
                         std::string(DataTypeConfigName(sig->dtype)) + " in the model");
    }
    if (sig && (sig->shape.size() != 1 || sig->shape[0] >= 0)) {
      // Triton's text, its double space included.
      return Unavailable(Loading(config) + "configuration expects model provides input with shape [-1]  " +
                         "for ragged input '" + name + "', model provides " + ShapeToString(sig->shape));
    }
  }
  for (const BatchInputSpec& spec : ragged->batch_inputs) {
    for (const std::string& target : spec.targets) {
      const TensorSignature* sig = FindTensor(signature.inputs, target);
      if (!sig) {
        return Unavailable(Loading(config) + "batch input target_name '" + target + "' is not an input of the model");
      }
      if (sig->dtype != spec.dtype) {
        return Unavailable(Loading(config) + "batch input '" + target + "' is " +
                           std::string(DataTypeConfigName(spec.dtype)) + " in the config but " +
                           std::string(DataTypeConfigName(sig->dtype)) + " in the model");
      }
    }
  }
  for (const BatchOutputSpec& spec : ragged->batch_outputs) {
    for (const std::string& target : spec.targets) {
      const TensorSignature* sig = FindTensor(signature.outputs, target);
      const auto listed = std::find_if(config.output().begin(), config.output().end(),
                                       [&](const auto& output) { return output.name() == target; });
      if (sig && listed != config.output().end() && FromConfigDataType(listed->data_type()) != sig->dtype) {
        return Unavailable(Loading(config) + "batch output '" + target + "' is " +
                           inference::DataType_Name(listed->data_type()) + " in the config but " +
                           std::string(DataTypeConfigName(sig->dtype)) + " in the model");
      }
    }
  }
  return Status::Ok();
}

}  // namespace ortserve

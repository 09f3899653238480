#include "config/ConfigAutoComplete.h"

#include <algorithm>

#include "config/ConfigTypes.h"
#include "config/SequenceConfig.h"

namespace ortserve {
namespace {

// Fills name/type/dims of one config tensor (input or output) from the model.
template <typename ConfigTensor>
void FillTensor(const TensorSignature& sig, bool batching, ConfigTensor* tensor) {
  if (tensor->name().empty()) tensor->set_name(sig.name);
  if (tensor->data_type() == inference::TYPE_INVALID) {
    tensor->set_data_type(ToConfigDataType(sig.dtype));
  }
  if (tensor->dims_size() == 0 && !tensor->has_reshape()) {
    Shape dims = sig.shape;
    if (batching && !dims.empty()) dims.erase(dims.begin());
    if (batching && dims.empty()) {
      // Triton's representation of a [batch]-shaped tensor: dims [1], reshape [].
      tensor->add_dims(1);
      tensor->mutable_reshape();
      return;
    }
    for (int64_t d : dims) tensor->add_dims(d < 0 ? -1 : d);
  }
}

// Triton's AutoCompleteMaxBatch.
Status CompleteMaxBatch(const ModelSignature& signature, inference::ModelConfig* config, int default_max_batch_size) {
  bool batchable = true;
  for (const auto& t : signature.inputs) batchable = batchable && HasDynamicFirstDim(t);
  for (const auto& t : signature.outputs) batchable = batchable && HasDynamicFirstDim(t);
  if (!batchable) {
    if (config->max_batch_size() == 0) return Status::Ok();
    return Unavailable("autofill failed for model '" + config->name() +
                       "': model does not support batching while non-zero max_batch_size is specified (max_batch_size " +
                       std::to_string(config->max_batch_size()) + "; every model input and output needs a dynamic first "
                       "dim to batch)");
  }
  if (config->max_batch_size() == 0) config->set_max_batch_size(std::max(default_max_batch_size, 0));
  if (config->max_batch_size() > 1 && !config->has_sequence_batching() && !config->has_dynamic_batching()) {
    config->mutable_dynamic_batching();
  }
  return Status::Ok();
}

template <typename ConfigTensors>
void FillListedTensors(const std::vector<TensorSignature>& model, bool batching, ConfigTensors* tensors) {
  for (auto& tensor : *tensors) {
    if (const auto* sig = FindTensor(model, tensor.name())) FillTensor(*sig, batching, &tensor);
  }
}

}  // namespace

Status AutoCompleteConfig(const ModelSignature& signature, inference::ModelConfig* config,
                          int default_max_batch_size) {
  const int listed_inputs = config->input_size() + config->batch_input_size();
  if (listed_inputs == 0 || config->output_size() == 0) {
    ORTSERVE_RETURN_IF_ERROR(CompleteMaxBatch(signature, config, default_max_batch_size));
  }
  const bool batching = config->max_batch_size() > 0;
  // Control and state tensors are the server's, not the client's: they stay
  // out of the config's lists (as Triton's).
  if (listed_inputs == 0) {
    for (const auto& t : signature.inputs) {
      if (!IsServerFedInput(*config, t.name)) FillTensor(t, batching, config->add_input());
    }
  } else {
    FillListedTensors(signature.inputs, batching, config->mutable_input());
  }
  if (config->output_size() == 0) {
    for (const auto& t : signature.outputs) {
      if (!IsStateOutput(*config, t.name)) FillTensor(t, batching, config->add_output());
    }
  } else {
    FillListedTensors(signature.outputs, batching, config->mutable_output());
  }
  return Status::Ok();
}

}  // namespace ortserve

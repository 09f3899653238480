#include "repository/ConfigAutoComplete.h"

#include "repository/ConfigTypes.h"
#include "repository/SequenceConfig.h"

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

}  // namespace

void AutoCompleteConfig(const ModelSignature& signature, inference::ModelConfig* config,
                        int default_max_batch_size) {
  if (config->input_size() == 0 && config->output_size() == 0 && config->max_batch_size() == 0) {
    bool batchable = !signature.inputs.empty() && !signature.outputs.empty();
    for (const auto& t : signature.inputs) batchable = batchable && HasDynamicFirstDim(t);
    for (const auto& t : signature.outputs) batchable = batchable && HasDynamicFirstDim(t);
    if (batchable && default_max_batch_size > 0) {
      config->set_max_batch_size(default_max_batch_size);
      if (default_max_batch_size > 1 && !config->has_sequence_batching() && !config->has_dynamic_batching()) {
        config->mutable_dynamic_batching();
      }
    }
  }
  const bool batching = config->max_batch_size() > 0;
  // Control and state tensors are the server's, not the client's: they stay
  // out of the config's lists (as Triton's).
  if (config->input_size() == 0) {
    for (const auto& t : signature.inputs) {
      if (!IsServerFedInput(*config, t.name)) FillTensor(t, batching, config->add_input());
    }
  } else {
    for (auto& input : *config->mutable_input()) {
      if (const auto* sig = FindTensor(signature.inputs, input.name())) FillTensor(*sig, batching, &input);
    }
  }
  if (config->output_size() == 0) {
    for (const auto& t : signature.outputs) {
      if (!IsStateOutput(*config, t.name)) FillTensor(t, batching, config->add_output());
    }
  } else {
    for (auto& output : *config->mutable_output()) {
      if (const auto* sig = FindTensor(signature.outputs, output.name())) FillTensor(*sig, batching, &output);
    }
  }
  if (config->instance_group_size() == 0) {
    auto* group = config->add_instance_group();
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    group->set_count(1);
  }
  for (int i = 0; i < config->instance_group_size(); ++i) {
    auto* group = config->mutable_instance_group(i);
    if (group->name().empty()) group->set_name(config->name() + "_" + std::to_string(i));
    if (group->count() == 0) group->set_count(1);
  }
}

}  // namespace ortserve

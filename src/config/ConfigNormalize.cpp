#include "config/ConfigNormalize.h"

#include "config/ConfigTypes.h"
#include "config/EnsembleGraph.h"
#include "config/SequenceConfig.h"

namespace ortserve {
namespace {

void NormalizeInstanceGroups(inference::ModelConfig* config) {
  using Group = inference::ModelInstanceGroup;
  if (config->instance_group_size() == 0) config->add_instance_group()->set_name(config->name());
  for (int i = 0; i < config->instance_group_size(); ++i) {
    Group* group = config->mutable_instance_group(i);
    if (group->name().empty()) group->set_name(config->name() + "_" + std::to_string(i));
    if (group->kind() == Group::KIND_AUTO) group->set_kind(Group::KIND_CPU);
    if (group->count() < 1) {
      group->set_count(group->kind() == Group::KIND_CPU ? kDefaultCpuInstanceCount : kDefaultGpuInstanceCount);
    }
  }
}

}  // namespace

void NormalizeModelConfig(inference::ModelConfig* config) {
  if (!config->has_version_policy()) config->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  // An ensemble runs no instance of its own (Triton leaves it as written).
  if (IsEnsemble(*config)) return;
  const int max_batch_size = config->max_batch_size();
  if (config->has_dynamic_batching() && config->dynamic_batching().preferred_batch_size_size() == 0 &&
      max_batch_size > 0) {
    config->mutable_dynamic_batching()->add_preferred_batch_size(max_batch_size);
  }
  if (config->has_sequence_batching()) {
    auto* sequence = config->mutable_sequence_batching();
    if (sequence->max_sequence_idle_microseconds() == 0) {
      sequence->set_max_sequence_idle_microseconds(kDefaultSequenceIdleUs);
    }
    if (sequence->has_oldest() && sequence->oldest().preferred_batch_size_size() == 0 && max_batch_size > 0) {
      sequence->mutable_oldest()->add_preferred_batch_size(max_batch_size);
    }
  }
  auto* optimization = config->mutable_optimization();
  if (!optimization->has_input_pinned_memory()) optimization->mutable_input_pinned_memory()->set_enable(true);
  if (!optimization->has_output_pinned_memory()) optimization->mutable_output_pinned_memory()->set_enable(true);
  if (config->default_model_filename().empty()) config->set_default_model_filename(kDefaultModelFilename);
  NormalizeInstanceGroups(config);
}

}  // namespace ortserve

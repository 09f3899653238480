#include "server/common/ModelMetadata.h"

#include "config/ConfigTypes.h"

namespace ortserve::common {
namespace {

template <typename ConfigTensors>
std::vector<TensorMetadata> DescribeTensors(const ConfigTensors& tensors, bool batched) {
  std::vector<TensorMetadata> out;
  out.reserve(static_cast<size_t>(tensors.size()));
  for (const auto& tensor : tensors) {
    TensorMetadata& t = out.emplace_back();
    t.name = tensor.name();
    t.datatype = DataTypeName(FromConfigDataType(tensor.data_type()));
    if (batched) t.shape.push_back(-1);
    t.shape.insert(t.shape.end(), tensor.dims().begin(), tensor.dims().end());
  }
  return out;
}

ModelMetadata Describe(const std::string& name, std::vector<std::string> versions,
                       const inference::ModelConfig& config) {
  ModelMetadata metadata;
  metadata.name = name;
  metadata.versions = std::move(versions);
  metadata.platform = config.platform().empty() ? kOnnxPlatform : config.platform();
  const bool batched = config.max_batch_size() > 0;
  metadata.inputs = DescribeTensors(config.input(), batched);
  metadata.outputs = DescribeTensors(config.output(), batched);
  return metadata;
}

}  // namespace

ServerMetadata DescribeServer(std::string_view version) {
  return ServerMetadata{
      .name = std::string(kServerName),
      .version = std::string(version),
      // classification: an output's top classes (an output's
      // "classification" parameter); sequence: the sequence batcher and the
      // correlation request parameters (sequence_id, sequence_start,
      // sequence_end); model_repository: index, load and unload;
      // schedule_policy: the timeout and priority request parameters;
      // parameters: request and response parameters; system_shared_memory:
      // inputs and outputs in registered regions (with
      // --allow-client-shm=true); logging and trace: their run-time settings.
      .extensions = {"classification", "sequence", "model_repository", "schedule_policy", "model_configuration",
                     "system_shared_memory", "binary_tensor_data", "parameters", "statistics", "trace", "logging"},
  };
}

Result<ModelMetadata> DescribeModel(const ModelRepository& repository, const std::string& name,
                                    const std::string& version) {
  Result<std::shared_ptr<Model>> found = repository.GetModel(name, version);
  if (!found.ok()) {
    // --model-load-on-demand: a listed model describes itself unloaded.
    if (!version.empty() || !repository.NeedsLoad(name)) return found.status();
    Result<ModelRepository::ListedModel> listed = repository.Listed(name);
    if (!listed.ok()) return listed.status();
    return Describe(name, std::move(listed->versions), listed->config);
  }
  const Model& model = *found.value();
  ModelMetadata metadata;
  metadata.name = model.name();
  if (version.empty()) {
    for (const ModelIndexEntry& entry : repository.Index()) {
      if (entry.name == model.name() && entry.state == ModelState::kReady &&
          !entry.version.empty()) {
        metadata.versions.push_back(entry.version);
      }
    }
  }
  // A version asked for, or a model that left the index since GetModel.
  if (metadata.versions.empty()) metadata.versions.push_back(model.version());
  return Describe(model.name(), std::move(metadata.versions), model.config());
}

}  // namespace ortserve::common

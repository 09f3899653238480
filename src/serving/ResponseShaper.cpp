#include "serving/ResponseShaper.h"

#include <algorithm>

#include "config/ConfigTypes.h"

namespace ortserve {
namespace {

const inference::ModelOutput* FindOutput(const inference::ModelConfig& config, const std::string& name) {
  for (const auto& out : config.output()) {
    if (out.name() == name) return &out;
  }
  return nullptr;
}

}  // namespace

ResponseShaper::ResponseShaper(std::shared_ptr<const inference::ModelConfig> config,
                               std::vector<std::string> instance_outputs, std::shared_ptr<const OutputLabels> labels,
                               std::shared_ptr<const ShapeBuckets> buckets)
    : config_(std::move(config)),
      instance_outputs_(std::move(instance_outputs)),
      labels_(std::move(labels)),
      buckets_(std::move(buckets)) {
  any_reshape_ = HasOutputReshape(*config_);
  std::vector<std::string> config_names;
  for (const auto& out : config_->output()) config_names.push_back(out.name());
  if (config_names == instance_outputs_) return;
  for (const std::string& name : config_names) {
    auto it = std::find(instance_outputs_.begin(), instance_outputs_.end(), name);
    // Config checks ensured every config output is a model output.
    if (it != instance_outputs_.end()) config_order_.push_back(static_cast<size_t>(it - instance_outputs_.begin()));
  }
}

Status ResponseShaper::Shape(const InferenceRequest& request, InferenceResponse* response) const {
  if (request.requested_outputs.empty()) {
    if (!config_order_.empty()) KeepConfigOutputs(response);
  } else {
    ORTSERVE_RETURN_IF_ERROR(KeepRequested(request.requested_outputs, response));
  }
  if (buckets_) ORTSERVE_RETURN_IF_ERROR(buckets_->Crop(request, response));
  if (any_reshape_) ORTSERVE_RETURN_IF_ERROR(ApplyOutputReshape(*config_, response));
  NameRequested(request, response);
  return request.requested_outputs.empty() ? Status::Ok() : ClassifyRequested(response);
}

void ResponseShaper::NameRequested(const InferenceRequest& request, InferenceResponse* response) {
  if (!request.requested_outputs.empty()) {
    response->requested = request.requested_outputs;
    return;
  }
  response->requested.clear();
  response->requested.reserve(response->outputs.size());
  for (const Tensor& t : response->outputs) response->requested.push_back({t.name, false});
}

void ResponseShaper::KeepConfigOutputs(InferenceResponse* response) const {
  std::vector<Tensor> kept;
  kept.reserve(config_order_.size());
  for (size_t index : config_order_) {
    if (index < response->outputs.size()) kept.push_back(std::move(response->outputs[index]));
  }
  response->outputs = std::move(kept);
}

Status ResponseShaper::KeepRequested(const std::vector<RequestedOutput>& wanted, InferenceResponse* response) const {
  std::vector<Tensor> kept;
  kept.reserve(wanted.size());
  for (const RequestedOutput& w : wanted) {
    auto it = std::find(instance_outputs_.begin(), instance_outputs_.end(), w.name);
    const size_t index = static_cast<size_t>(it - instance_outputs_.begin());
    if (it == instance_outputs_.end() || index >= response->outputs.size()) {
      return Internal("model '" + config_->name() + "' produced no output named '" + w.name + "'");
    }
    // Admission rejected repeats, so each output is taken at most once.
    kept.push_back(std::move(response->outputs[index]));
  }
  response->outputs = std::move(kept);
  return Status::Ok();
}

// After the reshape: Triton classifies the output as the client would have
// received it.
Status ResponseShaper::ClassifyRequested(InferenceResponse* response) const {
  for (size_t i = 0; i < response->requested.size() && i < response->outputs.size(); ++i) {
    const RequestedOutput& wanted = response->requested[i];
    if (wanted.classification == 0) continue;
    Tensor& output = response->outputs[i];
    const std::vector<std::string>* labels = labels_ ? labels_->Find(output.name) : nullptr;
    ORTSERVE_RETURN_IF_ERROR(Classify(wanted.classification, config_->max_batch_size() > 0, labels, &output));
  }
  return Status::Ok();
}

Status ApplyOutputReshape(const inference::ModelConfig& config, InferenceResponse* response) {
  for (Tensor& t : response->outputs) {
    const inference::ModelOutput* out = FindOutput(config, t.name);
    if (out == nullptr || !out->has_reshape()) continue;
    Shape target = ConfigDims(out->dims());
    if (config.max_batch_size() > 0) {
      if (t.shape.empty()) return Internal("output '" + t.name + "' has no batch dim");
      target.insert(target.begin(), t.shape[0]);
    }
    auto reshaped = ReshapeDims(t.shape, target);
    if (!reshaped.ok()) {
      return Internal("output '" + t.name + "' of " + ("model '" + config.name() + "'") + ": " +
                      reshaped.status().message());
    }
    t.shape = std::move(reshaped).value();
  }
  return Status::Ok();
}

bool HasOutputReshape(const inference::ModelConfig& config) {
  for (const auto& out : config.output()) {
    if (out.has_reshape()) return true;
  }
  return false;
}

}  // namespace ortserve

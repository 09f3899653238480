#pragma once
// The response side of a served model's request path, in one call: from
// what the instances produced (every model output, in the instance's order)
// to what the client asked for -- the requested outputs in request order
// (all config outputs in config order when it named none), each output
// cropped back to the request's own length when the model pads to shape
// buckets (ShapeBuckets.h), reshaped back from its config `reshape` to
// [batch] + dims, then replaced by its classification when the request asked
// for one (Classification.h).
#include <memory>
#include <string>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "model_config.pb.h"
#include "serving/Classification.h"
#include "serving/ShapeBuckets.h"

namespace ortserve {

class ResponseShaper {
 public:
  // `instance_outputs`: the names the instances produce, in their order.
  // `labels`: the outputs' classification labels; null when none has any.
  // `buckets`: the model's shape buckets; null when it has none.
  ResponseShaper(std::shared_ptr<const inference::ModelConfig> config, std::vector<std::string> instance_outputs,
                 std::shared_ptr<const OutputLabels> labels = nullptr,
                 std::shared_ptr<const ShapeBuckets> buckets = nullptr);

  // `request` must have been admitted (its requested outputs exist). Fails
  // kInternal naming the output when the model did not produce it or its
  // reshape does not fit or a bucketed output cannot be cropped, and as
  // Classify() does for a classified output.
  Status Shape(const InferenceRequest& request, InferenceResponse* response) const;
  // Fills `response->requested` for outputs already in request order: the
  // request's requested outputs, or every output (not binary) when it named
  // none.
  static void NameRequested(const InferenceRequest& request, InferenceResponse* response);

 private:
  void KeepConfigOutputs(InferenceResponse* response) const;
  Status KeepRequested(const std::vector<RequestedOutput>& wanted, InferenceResponse* response) const;
  Status ClassifyRequested(InferenceResponse* response) const;

  const std::shared_ptr<const inference::ModelConfig> config_;
  const std::vector<std::string> instance_outputs_;
  const std::shared_ptr<const OutputLabels> labels_;  // may be null
  const std::shared_ptr<const ShapeBuckets> buckets_;  // may be null
  // The instance's index of each config output; empty when the two orders
  // are the same (then nothing is moved).
  std::vector<size_t> config_order_;
  bool any_reshape_ = false;
};

// Rewrites outputs of the response that have a config reshape back to
// [batch] + dims.
Status ApplyOutputReshape(const inference::ModelConfig& config, InferenceResponse* response);

// True when some config output has a reshape.
bool HasOutputReshape(const inference::ModelConfig& config);

}  // namespace ortserve

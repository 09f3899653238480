#pragma once
// Admission's rules: an inference request checked against a model config
// before it is scheduled, and the config's input `reshape` applied. Every
// message names the model, the tensor, what was expected and what was
// received. (The response side is serving/ResponseShaper.h.)
#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "model_config.pb.h"

namespace ortserve {

// kInvalidArgument for: unknown/duplicate/missing inputs, wrong datatype, rank
// or dims (-1 in the config matches anything), batch size outside
// [1, max_batch_size] or differing between inputs, data size that does not
// match the shape (malformed BYTES length prefixes included), unknown or
// duplicate requested outputs, classification asked of an output whose
// datatype cannot be classified, a priority above the configured
// priority_levels, an input that a sequence model's server feeds (control
// and state inputs). The data-size check is the only one for both front ends:
// their decoders frame tensors (HTTP binary data, gRPC raw_input_contents)
// without walking them.
Status ValidateRequest(const inference::ModelConfig& config, const InferenceRequest& request);

// Rewrites input shapes that have a config reshape to [batch] + reshape (or
// just reshape without batching). The request must have been validated.
Status ApplyInputReshape(const inference::ModelConfig& config, InferenceRequest* request);

}  // namespace ortserve

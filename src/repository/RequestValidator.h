#pragma once
// Checks an inference request against a model config before it is scheduled,
// and applies the config's input/output `reshape`. Every message names the
// model, the tensor, what was expected and what was received.
#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "model_config.pb.h"

namespace ortserve {

// kInvalidArgument for: unknown/duplicate/missing inputs, wrong datatype, rank
// or dims (-1 in the config matches anything), batch size outside
// [1, max_batch_size] or differing between inputs, data size that does not
// match the shape (malformed BYTES length prefixes included), unknown or
// duplicate requested outputs. The data-size check is the only one for both
// front ends: their decoders frame tensors (HTTP binary data, gRPC
// raw_input_contents) without walking them.
Status ValidateRequest(const inference::ModelConfig& config, const InferenceRequest& request);

// Rewrites input shapes that have a config reshape to [batch] + reshape (or
// just reshape without batching). The request must have been validated.
Status ApplyInputReshape(const inference::ModelConfig& config, InferenceRequest* request);

// Rewrites outputs of the response that have a config reshape back to
// [batch] + dims.
Status ApplyOutputReshape(const inference::ModelConfig& config, InferenceResponse* response);

// True when some config output has a reshape (only then is the completion
// callback wrapped).
bool HasOutputReshape(const inference::ModelConfig& config);

}  // namespace ortserve

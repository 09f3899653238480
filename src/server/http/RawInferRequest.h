#pragma once
// Triton's raw binary request (docs/protocol/extension_binary_data.md, "Raw
// Binary Request"): an infer request with `Inference-Header-Content-Length: 0`
// has no JSON header; its whole body is the bytes of the model's only input,
// whose name, datatype and shape come from the model's config:
//   - the config has exactly one input;
//   - a batching model (max_batch_size > 0) gets a batch of 1: [1, dims...];
//   - at most one variable dimension (-1), deduced from the body's size, which
//     must be a whole number of the fixed dimensions' bytes;
//   - a BYTES input must have shape [1] (no variable dimension): the body is
//     that one element's bytes;
//   - every output is returned, as binary data.
// Anything else is kInvalidArgument naming the model, the input and the rule.
#include <cstdint>
#include <memory>
#include <string>

#include "core/Status.h"
#include "model_config.pb.h"
#include "server/http/InferRequestDecoder.h"

namespace ortserve::http {

// True when an Inference-Header-Content-Length value announces a raw request
// (it is the number 0).
bool IsRawRequestHeaderLength(std::string_view header_length);

// The request that `body` (complete, already decompressed) makes of the model
// `model_name` with `config`. Fixed-size data views the body (no copy).
Result<DecodedInferRequest> DecodeRawInferRequest(std::shared_ptr<const std::string> body,
                                                  const std::string& model_name,
                                                  const inference::ModelConfig& config,
                                                  const InferDecodeOptions& options);

}  // namespace ortserve::http

#pragma once
// Decodes a KServe v2 infer request body (JSON, optionally followed by binary
// tensor data — Triton's binary_tensor_data extension) into an
// InferenceRequest. Pure function: no sockets, no repository.
//
// Only wire framing is checked here: well-formed JSON, known datatype names,
// shapes of non-negative integers whose sizes neither overflow nor exceed the
// limit, JSON data whose element count matches the shape, binary data inside
// the body and all of it claimed, request parameters of the right types
// (server/http/RequestParameters.h). Whether a tensor's bytes fit its shape and
// datatype (binary sizes, BYTES length prefixes) is checked once for both
// protocols by the request validator (serving/RequestValidator.h), with
// the model-level checks (names, repeated names, datatypes and shapes against
// the config, batch size) in Model::Infer.
//
// Binary inputs are not copied: their TensorData views the body, which the
// tensors keep alive through their owner.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "server/common/SharedMemoryParameters.h"
#include "server/common/TensorLimits.h"

namespace ortserve::http {

// The deepest JSON nesting a decoder may be configured to accept: the data
// walk recurses once per level, so this bounds its stack.
inline constexpr size_t kMaxJsonDepthLimit = 1024;
// --http-max-json-depth's default: above what Triton's data limit lets
// through (a request's 3 levels around its data, then 99 arrays), so that
// every request Triton accepts is parsed.
inline constexpr size_t kDefaultMaxJsonDepth = 128;
// Triton's limit on an input's JSON 'data' (HTTP_MAX_JSON_NESTING_DEPTH in
// its src/common.h): no element may lie this many arrays deep, the data
// itself being at depth 0. The refusal is Triton's "JSON nesting depth exceeds
// maximum allowed limit (100)", then the input's name.
inline constexpr size_t kMaxJsonDataDepth = 100;

struct InferDecodeOptions {
  // No decoded tensor may be larger than this (JSON data expands: "1," is two
  // bytes of body but eight bytes of FP64).
  size_t max_tensor_bytes = size_t{64} << 20;
  // No input may have more elements than this (checked from its shape).
  uint64_t max_tensor_elements = common::kDefaultMaxTensorElements;
  // JSON nested deeper than this (objects and arrays together) is rejected;
  // in [2, kMaxJsonDepthLimit]. Each input's 'data' is also held to
  // kMaxJsonDataDepth, whatever this is.
  size_t max_json_depth = kDefaultMaxJsonDepth;
};

struct DecodedInferRequest {
  // model_name / model_version / on_complete / cancelled are left for the caller.
  std::unique_ptr<InferenceRequest> request;
  // Request-level "binary_data_output": the default for outputs that do not say.
  bool binary_data_output = false;
  // Whether the request listed its outputs. If not, every output uses
  // binary_data_output; if so, RequestedOutput::binary_data is already resolved.
  bool outputs_listed = false;
  // Inputs whose data lies in a shared memory region (their TensorData is
  // empty until common::BindSharedMemory) and outputs to be written to one.
  common::SharedMemoryRefs shared_memory;
};

// `body` is the complete (already decompressed) request body.
// `header_length` is the raw Inference-Header-Content-Length value, if the
// header was present: the JSON is body[0, N) and binary data follows.
// Errors are kInvalidArgument (400) naming the input and the problem, or
// kPayloadTooLarge / kUnsupported where that is the cause.
Result<DecodedInferRequest> DecodeInferRequest(std::shared_ptr<const std::string> body,
                                               std::optional<std::string_view> header_length,
                                               const InferDecodeOptions& options = {});

// Parses an Inference-Header-Content-Length value against the body size.
Result<size_t> ParseInferenceHeaderLength(std::string_view value, size_t body_size);

}  // namespace ortserve::http

#pragma once
// Encodes an InferenceResponse as a KServe v2 JSON body, with outputs that
// asked for it appended as raw bytes after the JSON (binary_tensor_data
// extension; the JSON length goes in Inference-Header-Content-Length).
// Pure function: no sockets.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "core/Tensor.h"
#include "server/common/SharedMemoryParameters.h"

namespace ortserve::http {

struct EncodedInferResponse {
  std::string json;
  // Binary outputs in order, to be sent after `json` without copying
  // (each TensorData keeps its buffer alive).
  std::vector<TensorData> binary;
  size_t binary_bytes = 0;
  bool has_binary() const { return !binary.empty(); }
};

// `outputs_listed` / `binary_data_output` come from the decoded request: when
// the request listed outputs, each response.requested[i].binary_data decides;
// otherwise binary_data_output decides for all. FP16/BF16 outputs sent as JSON
// are widened to floats. An output whose data does not match its shape is a
// kInternal error (never read past a buffer). `in_shared_memory`, when
// given, is parallel to response.outputs: an output placed in a shared memory
// region is sent as name, datatype and shape only (no data, no parameters,
// as Triton).
using SharedMemoryPlacements = std::vector<std::optional<common::SharedMemoryPlacement>>;
Result<EncodedInferResponse> EncodeInferResponse(const InferenceResponse& response, bool outputs_listed,
                                                 bool binary_data_output,
                                                 const SharedMemoryPlacements* in_shared_memory = nullptr);

}  // namespace ortserve::http

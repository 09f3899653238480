#pragma once
// Helpers for the fuzz targets that link the repository layer (or above).
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "FuzzCommon.h"
#include "config/ConfigAutoComplete.h"
#include "config/ConfigChecks.h"
#include "config/ConfigParse.h"
#include "config/ConfigTypes.h"
#include "model_config.pb.h"
#include "serving/RequestValidator.h"
#include "serving/ResponseShaper.h"

namespace ortserve::fuzz {

// The model the request decoders' inputs are checked against after decoding
// (RequestValidator + input reshape, as the server does before scheduling).
// The seed corpora use these names, so valid seeds reach the validator.
inline const inference::ModelConfig& ValidationConfig() {
  static const inference::ModelConfig config = [] {
    auto parsed = ParseModelConfig(R"pb(
      name: "fuzz"
      platform: "onnxruntime_onnx"
      max_batch_size: 8
      input [
        { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 2 ] reshape: { shape: [ -1 ] } },
        { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] optional: true }
      ]
      output [
        { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
        { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1 ] }
      ]
    )pb");
    FUZZ_CHECK(parsed.ok());
    return std::move(parsed).value();
  }();
  return config;
}

// Logging off: fuzzing runs millions of inputs and some paths warn.
// What the server does with a decoded request (either front end): if the
// validator accepts it, every tensor's bytes fit its shape -- the promise
// the runtime relies on for binary/raw data -- and a config reshape keeps
// each tensor's element count.
inline void CheckValidationAndReshape(InferenceRequest* request) {
  const inference::ModelConfig& config = ValidationConfig();
  if (!ValidateRequest(config, *request).ok()) return;
  for (const Tensor& t : request->inputs) CheckSizeMatchesShape(t);
  std::vector<std::optional<uint64_t>> counts;
  for (const Tensor& t : request->inputs) counts.push_back(ElementCount(t.shape));
  if (!ApplyInputReshape(config, request).ok()) return;
  for (size_t i = 0; i < request->inputs.size(); ++i) {
    FUZZ_CHECK(ElementCount(request->inputs[i].shape) == counts[i]);
  }
}

inline bool QuietLogs() {
  spdlog::set_level(spdlog::level::off);
  return true;
}

}  // namespace ortserve::fuzz

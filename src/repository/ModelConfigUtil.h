#pragma once
// Reading, completing and checking Triton model configs (config.pbtxt) for
// ONNX models. Pure functions over inference::ModelConfig and the model's
// signature, so each rule is unit-testable without loading a model.
#include <optional>
#include <string>
#include <vector>

#include "core/DataType.h"
#include "core/Status.h"
#include "core/Tensor.h"
#include "model_config.pb.h"
#include "runtime/OrtModelInstance.h"

namespace ortserve {

// max_batch_size given to a model whose config does not set it (or that has no
// config) when every input and output has a dynamic first dimension. Triton's
// onnxruntime backend uses --backend-config=default-max-batch-size (4 there);
// ortserve's documented default is 8: large enough for dynamic batching to pay
// off on CPU, small enough that a batch adds little latency.
inline constexpr int kDefaultMaxBatchSize = 8;

inline constexpr const char* kOnnxPlatform = "onnxruntime_onnx";
inline constexpr const char* kOnnxBackend = "onnxruntime";
inline constexpr const char* kDefaultModelFilename = "model.onnx";

// Parses config.pbtxt text. `label` prefixes error positions; a syntax error
// fails with kInvalidArgument "config.pbtxt:LINE:COL: message" (1-based).
Result<inference::ModelConfig> ParseModelConfig(const std::string& text,
                                                const std::string& label = "config.pbtxt");

// Dotted paths ("optimization.cuda", "input.allow_ragged_batch") of fields set
// in the config that ortserve parses but does not act on. Each path once, in
// field order. sequence_batching is not listed: it fails the load instead.
std::vector<std::string> IgnoredConfigFields(const inference::ModelConfig& config);

// Parameter keys that ortserve understands (Triton onnxruntime backend names
// plus "allow_spinning").
bool IsKnownParameter(const std::string& key);

// parameters { key: "fallback_model" value { string_value: "<model>" } }: the
// model that serves this model's requests when it is overloaded or its run
// fails (see docs/model-config.md).
inline constexpr const char* kFallbackModelParameter = "fallback_model";
// "adaptive" (default) or "fixed": how the dynamic batcher's window closes
// (docs/model-config.md, "Adaptive batching window").
inline constexpr const char* kBatchWindowParameter = "batch_window";
// The fallback named by `config`; empty when none.
std::string FallbackModelName(const inference::ModelConfig& config);
// Whether `fallback` can serve every request `primary` accepts: the same
// inputs and outputs (names, data types, dims, in any order), batching on
// both or neither, and a max_batch_size at least the primary's. The message
// names the first difference.
Status CheckFallbackCompatible(const inference::ModelConfig& primary,
                               const inference::ModelConfig& fallback);

// Config <-> core data type. TYPE_STRING is BYTES.
DataType FromConfigDataType(inference::DataType type);
inference::DataType ToConfigDataType(DataType type);

// Checks platform/backend and fills whichever is empty. Other platforms or
// backends, ensembles and sequence batching fail with kUnavailable and the
// reason.
Status CheckPlatform(inference::ModelConfig* config);

// Triton's auto-complete from the ONNX signature. `has_config_file` false
// means the config is empty apart from what the repository set (name).
//  - no inputs and no outputs in the config and max_batch_size 0: the model is
//    batchable when every input and output has a dynamic first dim; then
//    max_batch_size = kDefaultMaxBatchSize and dynamic_batching is enabled.
//  - missing inputs/outputs are filled (name, type, dims without the batch dim
//    when max_batch_size > 0; a tensor of shape [batch] gets dims [1] and
//    reshape [] as Triton does). Entries without data_type or dims are filled.
//  - no instance_group: one KIND_CPU instance.
void AutoCompleteConfig(const ModelSignature& signature, inference::ModelConfig* config);

// The config must describe the model: every config input/output exists in the
// model with the same type and compatible dims (-1 matches anything), every
// model input is in the config, a batching model has a dynamic first dim.
// kUnavailable naming the tensor otherwise.
Status ValidateConfigAgainstSignature(const inference::ModelConfig& config,
                                      const ModelSignature& signature);

// Maps `from` onto `to_dims` with the same element count; one -1 in `to_dims`
// is inferred. kInvalidArgument if the counts cannot match.
Result<Shape> ReshapeDims(const Shape& from, const Shape& to_dims);

// Dims of a config tensor as a Shape.
Shape ConfigDims(const google::protobuf::RepeatedField<int64_t>& dims);

}  // namespace ortserve

#pragma once
// Reading a Triton model config (config.pbtxt) and telling what in it
// ortserve does not act on. Pure functions over inference::ModelConfig.
#include <string>
#include <vector>

#include "core/Status.h"
#include "model_config.pb.h"

namespace ortserve {

// Parses config.pbtxt text. `label` prefixes error positions; a syntax error
// fails with kInvalidArgument "config.pbtxt:LINE:COL: message" (1-based).
Result<inference::ModelConfig> ParseModelConfig(const std::string& text,
                                                const std::string& label = "config.pbtxt");

// Dotted paths ("optimization.cuda", "input.allow_ragged_batch") of fields set
// in the config that ortserve parses but does not act on. Each path once, in
// field order. (sequence_batching's own: oldest.preserve_ordering, and a
// state's use_same_buffer_for_input_output and use_growable_memory.)
std::vector<std::string> IgnoredConfigFields(const inference::ModelConfig& config);

// Parameter keys that ortserve understands (Triton onnxruntime backend names
// plus "allow_spinning").
bool IsKnownParameter(const std::string& key);

// parameters { key: "fallback_model" value { string_value: "<model>" } }: the
// model that serves this model's requests when it is overloaded or its run
// fails (see docs/model-config.md).
inline constexpr const char* kFallbackModelParameter = "fallback_model";
// "fixed" (default, Triton's) or "adaptive": how the dynamic batcher's window
// closes (docs/model-config.md, "Adaptive batching window").
inline constexpr const char* kBatchWindowParameter = "batch_window";
inline constexpr const char* kInstanceBatchesParameter = "instance_batches";
// Microseconds: a model whose average run is below this runs a request on
// the HTTP I/O thread that received it when that thread serves one
// connection and the model is idle ("0": never; docs/model-config.md,
// "Inline runs").
inline constexpr const char* kInlineRunMaxUsParameter = "inline_run_max_us";
inline constexpr int kDefaultInlineRunMaxUs = 50;
// The fallback named by `config`; empty when none.
std::string FallbackModelName(const inference::ModelConfig& config);

}  // namespace ortserve

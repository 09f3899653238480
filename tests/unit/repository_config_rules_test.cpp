// Triton's config rules that need no model file (config/ConfigRules.h):
// each message holds the text Triton's qa/L0_model_config greps for, and a
// config error is reported before any missing version directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/ConfigParse.h"
#include "config/ConfigRules.h"
#include "repository/ModelPreparation.h"

#include "ParsedConfig.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ModelRulesMessage(const std::string& text) {
  Status st = CheckModelConfigRules(Parse(text));
  EXPECT_FALSE(st.ok()) << text;
  return st.message();
}

std::string IoRulesMessage(const std::string& text) {
  Status st = CheckModelIoRules(Parse(text));
  EXPECT_FALSE(st.ok()) << text;
  return st.message();
}

TEST(ConfigRules, ModelRulesUseTritonsWords) {
  EXPECT_THAT(ModelRulesMessage(R"(name: "m" max_batch_size: -2)"),
              HasSubstr("'max_batch_size' must be non-negative value for m"));
  EXPECT_THAT(ModelRulesMessage(R"(name: "m" max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 8 ] })"),
              HasSubstr("dynamic batching preferred size must be <= max batch size for m"));
  EXPECT_THAT(ModelRulesMessage(R"(name: "m" max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 0 ] })"),
              HasSubstr("dynamic batching preferred size must be positive for m"));
  EXPECT_THAT(ModelRulesMessage(R"(name: "m" max_batch_size: 4
      dynamic_batching { priority_levels: 3 default_priority_level: 4 })"),
              HasSubstr("default priority level must be in range [1, 3] for m"));
  EXPECT_THAT(ModelRulesMessage(R"(name: "m" max_batch_size: 4
      dynamic_batching { priority_levels: 3 default_priority_level: 1
        priority_queue_policy { key: 4 value { max_queue_size: 1 } } })"),
              HasSubstr("priority queue policy must have priority level in range [1, 3] for m"));
  EXPECT_THAT(ModelRulesMessage(R"(name: "m" max_batch_size: 4
      dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 })"),
              HasSubstr("Only one priority level is allowed when 'preserve_ordering' is true for m"));
  EXPECT_THAT(ModelRulesMessage(R"(name: "m" max_batch_size: 4
      dynamic_batching { preserve_ordering: true
        default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 10 } })"),
              HasSubstr("Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m"));
  EXPECT_TRUE(CheckModelConfigRules(Parse(R"(name: "m" max_batch_size: 4
      dynamic_batching { preferred_batch_size: [ 2, 4 ] priority_levels: 2 default_priority_level: 2 })"))
                  .ok());
}

// The configs of Triton's qa/L0_model_config/noautofill_platform/batch_*.
constexpr const char* kBatchIoTensors = R"(name: "m" max_batch_size: 4
    input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true } ]
    output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ -1 ] } ])";

std::string BatchIoMessage(const std::string& entries) { return IoRulesMessage(kBatchIoTensors + entries); }

TEST(ConfigRules, BatchInputsUseTritonsWords) {
  for (const char* kind : {"BATCH_ELEMENT_COUNT", "BATCH_ACCUMULATED_ELEMENT_COUNT",
                           "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE",
                           "BATCH_ITEM_SHAPE", "BATCH_ITEM_SHAPE_FLATTEN"}) {
    const std::string k = kind;
    EXPECT_THAT(BatchIoMessage("batch_input [ { kind: " + k + R"( target_name: "B" data_type: TYPE_FP32 } ])"),
                HasSubstr("batch input kind '" + k + "' expects 1 source input, got 0 for m"));
    EXPECT_THAT(BatchIoMessage("batch_input [ { kind: " + k +
                               R"( target_name: "B" data_type: TYPE_FP32 source_input: [ "INPUT", "INPUT" ] } ])"),
                HasSubstr("batch input kind '" + k + "' expects 1 source input, got 2 for m"));
  }
  EXPECT_THAT(BatchIoMessage(R"(batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "B" data_type: TYPE_FP32
      source_input: "UNKNOWN_INPUT" } ])"),
              HasSubstr("unknown source input name 'UNKNOWN_INPUT' for m"));
  EXPECT_THAT(BatchIoMessage(R"(batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "B" data_type: TYPE_INT64
      source_input: "INPUT" } ])"),
              HasSubstr("batch input data type must be TYPE_INT32 or TYPE_FP32 for m"));
}

TEST(ConfigRules, BatchOutputsUseTritonsWords) {
  EXPECT_THAT(BatchIoMessage(R"(batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "OUTPUT" } ])"),
              HasSubstr("batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 0 for m"));
  EXPECT_THAT(BatchIoMessage(R"(batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "OUTPUT"
      source_input: [ "INPUT", "INPUT" ] } ])"),
              HasSubstr("batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 2 for m"));
  EXPECT_THAT(BatchIoMessage(R"(batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "OUTPUT"
      source_input: "UNKNOWN_INPUT" } ])"),
              HasSubstr("unknown source input name 'UNKNOWN_INPUT' for m"));
  EXPECT_THAT(BatchIoMessage(R"(batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE
      target_name: "UNKNOWN_OUTPUT" source_input: "INPUT" } ])"),
              HasSubstr("unknown target output name 'UNKNOWN_OUTPUT' for m"));
  EXPECT_THAT(BatchIoMessage(R"(batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE
      target_name: [ "OUTPUT", "OUTPUT" ] source_input: "INPUT" } ])"),
              HasSubstr("target output name 'OUTPUT' can only be specified once for m"));
}

TEST(ConfigRules, WellFormedBatchIoPasses) {
  const std::string entries = R"(
      batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "OFFSETS" data_type: TYPE_INT32
                      source_input: "INPUT" } ]
      batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "OUTPUT" source_input: "INPUT" } ])";
  EXPECT_TRUE(CheckModelIoRules(Parse(kBatchIoTensors + entries)).ok());
  // The outputs auto-complete will fill are not known yet.
  EXPECT_TRUE(CheckModelIoRules(Parse(R"(name: "m" max_batch_size: 4
      input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ -1 ] } ]
      batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "Y" source_input: "INPUT" } ])"),
                               /*skip_gaps=*/true)
                  .ok());
}

TEST(ConfigRules, IoRulesUseTritonsWords) {
  EXPECT_THAT(IoRulesMessage(R"(name: "m" input [ { name: "input" dims: [ 4 ] } ])"),
              HasSubstr("model input 'input' must specify 'data_type' for m"));
  EXPECT_THAT(IoRulesMessage(R"(name: "m" output [ { name: "output" data_type: TYPE_FP32 } ])"),
              HasSubstr("model output 'output' must specify 'dims' for m"));
  EXPECT_THAT(IoRulesMessage(R"(name: "m" input [ { name: "input" data_type: TYPE_FP32 dims: [ 0 ] } ])"),
              HasSubstr("model input 'input' dimension must be integer >= 1, or -1 to indicate a variable-size "
                        "dimension for m"));
  EXPECT_THAT(IoRulesMessage(R"(name: "m" output [ { name: "output" data_type: TYPE_FP32 dims: [ 4 ]
      reshape { shape: [ 0 ] } } ])"),
              HasSubstr("model output 'output' reshape dimensions must be integer >= 1, or -1 to indicate a "
                        "variable-size dimension for m"));
  EXPECT_THAT(IoRulesMessage(R"(name: "m" input [ { name: "input" data_type: TYPE_FP32 dims: [ 2, 4 ]
      reshape { shape: [ 9 ] } } ])"),
              HasSubstr("model input 'input' has different size for dims and reshape for m"));
  EXPECT_THAT(IoRulesMessage(R"(name: "m" input [ { name: "input" data_type: TYPE_FP32 dims: [ 2, -1 ]
      reshape { shape: [ 2 ] } } ])"),
              HasSubstr("model input 'input' has different size for dims and reshape for m"));
  EXPECT_THAT(IoRulesMessage(R"(name: "m" output [ { name: "output" data_type: TYPE_FP32 dims: [ -1, 2, -1 ]
      reshape { shape: [ -1, 2 ] } } ])"),
              HasSubstr("model output 'output' has different number of variable-size dimensions for dims and "
                        "reshape for m"));
  EXPECT_THAT(IoRulesMessage(R"(name: "m" input [ { name: "input" data_type: TYPE_FP32 dims: [ 2, -1, 3 ]
      reshape { shape: [ 3, -1, 2 ] } } ])"),
              HasSubstr("model input 'input' has different size for dims and reshape for m"));
  // Runs between -1s match: [2, 4, -1, 6] -> [8, -1, 1, 6]; [1] -> [] with a batch dim.
  // A scalar without batching is ortserve's (Triton refuses it).
  EXPECT_TRUE(CheckModelIoRules(Parse(R"(name: "m" input [ { name: "sr" data_type: TYPE_INT64 dims: [ 1 ]
      reshape { } } ])")).ok());
  EXPECT_TRUE(CheckModelIoRules(Parse(R"(name: "m" max_batch_size: 2
      input [ { name: "a" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ] reshape { shape: [ 8, -1, 1, 6 ] } },
              { name: "b" data_type: TYPE_FP32 dims: [ 1 ] reshape { } } ])"))
                  .ok());
}

TEST(ConfigRules, GapsLeftForAutoCompleteAreSkippedOnlyWhenAsked) {
  const auto config = Parse(R"(name: "m" input [ { name: "a" }, { name: "b" data_type: TYPE_FP32 dims: [ 0 ] } ])");
  EXPECT_THAT(CheckModelIoRules(config).message(), HasSubstr("model input 'a' must specify 'data_type' for m"));
  EXPECT_THAT(CheckModelIoRules(config, /*skip_gaps=*/true).message(),
              HasSubstr("model input 'b' dimension must be integer >= 1"));
}

// Triton's qa/L0_model_config noautofill_platform/negative_max_batch_size:
// the config has no version directory, and its error is the config's.
TEST(ConfigRules, ConfigErrorComesBeforeAMissingVersionDirectory) {
  const fs::path repo = fs::temp_directory_path() / ("ortserve_rules_" + std::to_string(::getpid()));
  fs::create_directories(repo / "negative_max_batch_size");
  std::ofstream(repo / "negative_max_batch_size" / "config.pbtxt") << R"(name: "negative_max_batch_size"
platform: "onnxruntime_onnx"
max_batch_size: -2
input [ { name: "data" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 1, 28, 28 ] } ]
output [ { name: "prob" data_type: TYPE_FP32 dims: [ 10, 1, 1 ] } ])";
  for (const bool auto_complete : {true, false}) {
    AutoCompletePolicy policy;
    policy.enabled = auto_complete;
    const PreparedModel prepared = PrepareModel(repo, "negative_max_batch_size", policy);
    EXPECT_THAT(prepared.failure,
                HasSubstr("'max_batch_size' must be non-negative value for negative_max_batch_size"));
  }
  fs::create_directories(repo / "zero_dims");
  std::ofstream(repo / "zero_dims" / "config.pbtxt") << R"(platform: "onnxruntime_onnx"
input [ { name: "input" data_type: TYPE_FP32 dims: [ 0 ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 4 ] } ])";
  for (const bool auto_complete : {true, false}) {
    AutoCompletePolicy policy;
    policy.enabled = auto_complete;
    EXPECT_THAT(PrepareModel(repo, "zero_dims", policy).failure,
                HasSubstr("model input 'input' dimension must be integer >= 1"));
  }
  // Triton's noautofill_platform/control_kind_end_multiple (strict configs).
  fs::create_directories(repo / "two_ends");
  std::ofstream(repo / "two_ends" / "config.pbtxt") << R"(platform: "onnxruntime_onnx" max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
sequence_batching {
  control_input [
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },
    { name: "END2" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }
  ]
})";
  AutoCompletePolicy strict;
  strict.enabled = false;
  EXPECT_THAT(PrepareModel(repo, "two_ends", strict).failure,
              HasSubstr("sequence batching specifies multiple CONTROL_SEQUENCE_END tensors for two_ends"));
  // Triton's noautofill_platform/batch_output_unknown_target.
  fs::create_directories(repo / "unknown_target");
  std::ofstream(repo / "unknown_target" / "config.pbtxt") << R"(platform: "onnxruntime_onnx" max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ -1 ] } ]
batch_output [ { target_name: "UNKNOWN_OUTPUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ])";
  for (const bool auto_complete : {true, false}) {
    AutoCompletePolicy policy;
    policy.enabled = auto_complete;
    EXPECT_THAT(PrepareModel(repo, "unknown_target", policy).failure,
                HasSubstr("unknown target output name 'UNKNOWN_OUTPUT' for unknown_target"));
  }
  fs::remove_all(repo);
}

constexpr const char* kGpuPrefix = "specifies invalid or unsupported gpu id ";
constexpr const char* kGpuWords = ". GPUs with at least the minimum required CUDA compute compatibility of 6.000000 are: ";

std::string GpuMessage(const std::string& groups, bool cuda_provider) {
  inference::ModelConfig config = Parse("name: \"m\" " + groups);
  Status st = CheckInstanceGroupGpus(config, cuda_provider);
  EXPECT_FALSE(st.ok()) << groups;
  return st.message();
}

// Triton's noautofill_platform/invalid_gpu and negative_gpu (normalised: the
// group without a kind is KIND_CPU here), on a server with and without the
// CUDA provider.
TEST(ConfigRules, GpuIdsUseTritonsWords) {
  const std::string invalid = R"(instance_group [ { name: "m_0" kind: KIND_GPU gpus: [ 42 ] } ])";
  EXPECT_THAT(GpuMessage(invalid, false),
              HasSubstr(std::string("instance group m_0 of model m ") + kGpuPrefix + "42" + kGpuWords));
  EXPECT_TRUE(CheckInstanceGroupGpus(Parse("name: \"m\" " + invalid), true).ok());  // the provider's to refuse
  const std::string negative = R"(instance_group [ { name: "m_0" kind: KIND_CPU gpus: [ 0 ] },
                                                   { name: "m_1" kind: KIND_GPU gpus: [ -1 ] } ])";
  for (const bool cuda : {false, true}) {
    EXPECT_THAT(GpuMessage(negative, cuda),
                HasSubstr(std::string("instance group m_1 of model m ") + kGpuPrefix + "-1" + kGpuWords));
  }
  EXPECT_EQ(GpuMessage(R"(instance_group [ { name: "m_0" kind: KIND_CPU gpus: [ 0 ] } ])", true),
            "instance group m_0 of model m has kind KIND_CPU but specifies one or more GPUs");
  EXPECT_TRUE(CheckInstanceGroupGpus(Parse(R"(name: "m" instance_group [ { kind: KIND_GPU }, { kind: KIND_CPU } ])"),
                                     false).ok());
}

// Triton's noautofill_platform/invalid_gpu and reshape_nobatch_empty0/1: no
// model file, and the error is the config's.
TEST(ConfigRules, GpuAndScalarErrorsComeBeforeMissingFiles) {
  const fs::path repo = fs::temp_directory_path() / ("ortserve_rules_files_" + std::to_string(::getpid()));
  fs::create_directories(repo / "invalid_gpu" / "1");
  std::ofstream(repo / "invalid_gpu" / "config.pbtxt") << R"(name: "invalid_gpu" platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "data" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 1, 28, 28 ] } ]
output [ { name: "prob" data_type: TYPE_FP32 dims: [ 10, 1, 1 ] } ]
instance_group [ { kind: KIND_GPU gpus: [ 42 ] } ])";
  fs::create_directories(repo / "reshape_nobatch_empty0");
  std::ofstream(repo / "reshape_nobatch_empty0" / "config.pbtxt") << R"(platform: "onnxruntime_onnx"
input [ { name: "input" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 1 ] } ])";
  fs::create_directories(repo / "reshape_nobatch_empty1" / "1");  // a version directory without its file
  std::ofstream(repo / "reshape_nobatch_empty1" / "config.pbtxt") << R"(platform: "onnxruntime_onnx"
input [ { name: "input" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ])";
  AutoCompletePolicy strict;
  strict.enabled = false;
  const PreparedModel gpu = PrepareModel(repo, "invalid_gpu", strict);
  EXPECT_THAT(gpu.failure, HasSubstr(std::string("instance group invalid_gpu_0 of model invalid_gpu ") + kGpuPrefix +
                                     "42" + kGpuWords));
  EXPECT_TRUE(gpu.version_failures.empty());
  EXPECT_THAT(PrepareModel(repo, "reshape_nobatch_empty0", strict).failure,
              HasSubstr("model input 'input' cannot have empty reshape for non-batching model as scalar tensors "
                        "are not supported for reshape_nobatch_empty0"));
  const PreparedModel output = PrepareModel(repo, "reshape_nobatch_empty1", strict);
  ASSERT_EQ(output.version_failures.count(1), 1u);
  EXPECT_THAT(output.version_failures.at(1),
              HasSubstr("model output 'output' cannot have empty reshape for non-batching model as scalar tensors "
                        "are not supported for reshape_nobatch_empty1"));
  fs::remove_all(repo);
}

}  // namespace
}  // namespace ortserve

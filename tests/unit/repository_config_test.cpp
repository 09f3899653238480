// Config parsing, ignored fields, platform checks, auto-complete, signature
// checks, version policy, thread plan and config -> runtime/scheduler options.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/ConfigAutoComplete.h"
#include "config/ConfigChecks.h"
#include "config/ConfigNormalize.h"
#include "config/ConfigParse.h"
#include "config/ConfigTypes.h"
#include "config/RuntimeConfig.h"
#include "config/VersionPolicy.h"
#include "repository/ThreadPlan.h"

#include "ParsedConfig.h"
#include "TritonExamples.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Triton's example configs (TritonExamples.h: the generated repository, and
// Triton's own files when TRITON_EXAMPLES_DIR names them).
class TritonExampleConfigs : public testing_util::TritonExamplesTest {
 protected:
  inference::ModelConfig Read(const std::string& model) const {
    return Parse(ReadAll(dir() / model / "config.pbtxt"));
  }
};
INSTANTIATE_TRITON_EXAMPLES(TritonExampleConfigs);

TEST_P(TritonExampleConfigs, AllParse) {
  int parsed = 0;
  for (const auto& entry : fs::directory_iterator(dir())) {
    const fs::path config_path = entry.path() / "config.pbtxt";
    if (!fs::exists(config_path)) continue;
    auto config = ParseModelConfig(ReadAll(config_path));
    ASSERT_TRUE(config.ok()) << config_path << ": " << config.status().message();
    EXPECT_EQ(config->name(), entry.path().filename().string());
    EXPECT_EQ(config->platform(), "onnxruntime_onnx");
    EXPECT_EQ(config->max_batch_size(), 8);
    EXPECT_GT(config->input_size(), 0);
    ++parsed;
  }
  EXPECT_EQ(parsed, 5);
}

TEST_P(TritonExampleConfigs, FieldsLandWhereTritonPutsThem) {
  auto dyna = Read("simple_dyna_sequence");
  ASSERT_TRUE(dyna.has_sequence_batching());
  const auto& seq = dyna.sequence_batching();
  EXPECT_EQ(seq.max_sequence_idle_microseconds(), 10000000u);
  EXPECT_EQ(seq.oldest().max_candidate_sequences(), 1024);
  EXPECT_EQ(seq.oldest().max_queue_delay_microseconds(), 10000u);
  ASSERT_EQ(seq.control_input_size(), 4);
  EXPECT_EQ(seq.control_input(3).control(0).kind(),
            inference::ModelSequenceBatching::Control::CONTROL_SEQUENCE_CORRID);
  EXPECT_EQ(seq.control_input(3).control(0).data_type(), inference::TYPE_UINT64);
  EXPECT_EQ(dyna.parameters().at("execute_delay_ms").string_value(), "3");
  ASSERT_EQ(dyna.instance_group_size(), 1);
  EXPECT_EQ(dyna.instance_group(0).count(), 2);
  EXPECT_EQ(dyna.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);

  auto str = Read("simple_string");
  EXPECT_EQ(str.input(0).data_type(), inference::TYPE_STRING);
  EXPECT_EQ(FromConfigDataType(str.input(0).data_type()), DataType::kBytes);
}

TEST_P(TritonExampleConfigs, HaveNoIgnoredFields) {
  EXPECT_TRUE(IgnoredConfigFields(Read("simple")).empty());
  // sequence_batching is served (the sequence batcher), so it is no ignored field.
  EXPECT_TRUE(IgnoredConfigFields(Read("simple_sequence")).empty());
}

TEST_P(TritonExampleConfigs, StatefulModelIsOnnxRuntimes) {
  // A stateful model is the sequence batcher's (repository/SequenceConfig.h).
  auto seq = Read("simple_sequence");
  EXPECT_TRUE(CheckPlatform(&seq).ok());
  EXPECT_EQ(seq.platform(), "onnxruntime_onnx");
}

TEST(ModelConfigParse, WireFieldNumbersMatchTriton) {
  // Spot checks against Triton's model_config.proto numbering.
  const auto* d = inference::ModelConfig::descriptor();
  EXPECT_EQ(d->FindFieldByName("name")->number(), 1);
  EXPECT_EQ(d->FindFieldByName("platform")->number(), 2);
  EXPECT_EQ(d->FindFieldByName("version_policy")->number(), 3);
  EXPECT_EQ(d->FindFieldByName("max_batch_size")->number(), 4);
  EXPECT_EQ(d->FindFieldByName("input")->number(), 5);
  EXPECT_EQ(d->FindFieldByName("output")->number(), 6);
  EXPECT_EQ(d->FindFieldByName("instance_group")->number(), 7);
  EXPECT_EQ(d->FindFieldByName("default_model_filename")->number(), 8);
  EXPECT_EQ(d->FindFieldByName("dynamic_batching")->number(), 11);
  EXPECT_EQ(d->FindFieldByName("optimization")->number(), 12);
  EXPECT_EQ(d->FindFieldByName("sequence_batching")->number(), 13);
  EXPECT_EQ(d->FindFieldByName("parameters")->number(), 14);
  EXPECT_EQ(d->FindFieldByName("ensemble_scheduling")->number(), 15);
  EXPECT_EQ(d->FindFieldByName("model_warmup")->number(), 16);
  EXPECT_EQ(d->FindFieldByName("backend")->number(), 17);
  EXPECT_EQ(d->FindFieldByName("model_transaction_policy")->number(), 19);
  EXPECT_EQ(d->FindFieldByName("batch_input")->number(), 20);
  EXPECT_EQ(d->FindFieldByName("batch_output")->number(), 21);
  EXPECT_EQ(d->FindFieldByName("response_cache")->number(), 24);
  EXPECT_EQ(inference::ModelInput::descriptor()->FindFieldByName("optional")->number(), 8);
  EXPECT_EQ(inference::ModelOutput::descriptor()->FindFieldByName("label_filename")->number(), 4);
  EXPECT_EQ(inference::ModelInstanceGroup::descriptor()->FindFieldByName("kind")->number(), 4);
}

TEST(ModelConfigParse, MalformedConfigReportsLineAndColumn) {
  auto config = ParseModelConfig("name: \"m\"\nmax_batch_size: 8\ninput [ { nme: \"x\" } ]\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  // Line 3; protobuf places the column just after the unknown name.
  EXPECT_THAT(config.status().message(), testing::MatchesRegex("config\\.pbtxt:3:1[0-9]: .*"));
  EXPECT_NE(config.status().message().find("nme"), std::string::npos);

  auto bad_value = ParseModelConfig("max_batch_size: \"eight\"\n");
  ASSERT_FALSE(bad_value.ok());
  EXPECT_EQ(bad_value.status().message().rfind("config.pbtxt:1:", 0), 0u)
      << bad_value.status().message();
}

TEST(ModelConfigParse, IgnoredFieldsAreNamedOncePrecisely) {
  auto config = Parse(R"(
    name: "m"
    max_batch_size: 4
    input [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] allow_ragged_batch: true },
            { name: "b" data_type: TYPE_FP32 dims: [ 4 ] allow_ragged_batch: true } ]
    output [ { name: "c" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]
    optimization { graph { level: 1 } cuda { graphs: true } input_pinned_memory { enable: true } }
    dynamic_batching { preferred_batch_size: [ 2 ] preserve_ordering: true }
    response_cache { enable: true }
    model_transaction_policy { decoupled: true }
    batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "n" data_type: TYPE_INT32 source_input: "a" } ]
    instance_group [ { count: 2 kind: KIND_CPU rate_limiter { priority: 1 } } ]
  )");
  const std::vector<std::string> expected = {
      "instance_group.rate_limiter",
      "optimization.cuda", "optimization.input_pinned_memory", "dynamic_batching.preserve_ordering",
      "model_transaction_policy.decoupled"};
  auto ignored = IgnoredConfigFields(config);
  std::sort(ignored.begin(), ignored.end());
  auto sorted_expected = expected;
  std::sort(sorted_expected.begin(), sorted_expected.end());
  EXPECT_EQ(ignored, sorted_expected);
}

TEST(ModelConfigPlatform, FillsEmptyAndRejectsOthers) {
  inference::ModelConfig empty;
  ASSERT_TRUE(CheckPlatform(&empty).ok());
  EXPECT_EQ(empty.platform(), "onnxruntime_onnx");
  EXPECT_EQ(empty.backend(), "onnxruntime");

  inference::ModelConfig backend_only = Parse("backend: \"onnxruntime\"");
  EXPECT_TRUE(CheckPlatform(&backend_only).ok());
  EXPECT_EQ(backend_only.platform(), "onnxruntime_onnx");

  inference::ModelConfig tf = Parse("platform: \"tensorflow_savedmodel\"");
  Status st = CheckPlatform(&tf);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("tensorflow_savedmodel"), std::string::npos);

  // A platform nobody knows: Triton's words for the pair it makes.
  inference::ModelConfig typo = Parse("platform: \"onnxruntim\"");
  EXPECT_EQ(CheckPlatform(&typo).message().rfind("unexpected 'platform' and 'backend' pair, got:onnxruntim, onnxruntime", 0),
            0u);

  inference::ModelConfig python = Parse("backend: \"python\"");
  EXPECT_EQ(CheckPlatform(&python).code(), StatusCode::kUnavailable);

  // An ensemble gets its own checks (config/EnsembleGraph.h): one with no step fails them.
  auto ensemble = Parse("platform: \"ensemble\" ensemble_scheduling { step [] }");
  EXPECT_EQ(CheckPlatform(&ensemble).code(), StatusCode::kUnavailable);
  EXPECT_EQ(ensemble.platform(), "ensemble");
}

ModelSignature BatchableSignature() {
  return {{{"a", DataType::kFp32, {-1, 4}}, {"b", DataType::kInt64, {-1, 2, -1}}},
          {{"c", DataType::kFp32, {-1, 4}}}};
}

TEST(ModelConfigAutoComplete, DefaultMaxBatchSizeAsTritonsBackendConfig) {
  // --backend-config=default-max-batch-size=N: dynamic batching only above 1, 0: no batching.
  for (const int size : {4, 1, 0}) {
    inference::ModelConfig config;
    config.set_name("m");
    ASSERT_TRUE(AutoCompleteConfig(BatchableSignature(), &config, size).ok());
    EXPECT_EQ(config.max_batch_size(), size);
    EXPECT_EQ(config.has_dynamic_batching(), size > 1) << size;
    // Without a batch dim, the dims are the model's whole shape.
    EXPECT_EQ(ConfigDims(config.input(0).dims()), (size > 0 ? Shape{4} : Shape{-1, 4})) << size;
  }
}

TEST(ModelConfigAutoComplete, BatchableModelWithoutConfig) {
  inference::ModelConfig config;
  config.set_name("m");
  ASSERT_TRUE(AutoCompleteConfig(BatchableSignature(), &config).ok());
  NormalizeModelConfig(&config);
  EXPECT_EQ(kDefaultMaxBatchSize, 4);  // Triton's default-max-batch-size
  EXPECT_EQ(config.max_batch_size(), 4);
  ASSERT_TRUE(config.has_dynamic_batching());
  // Triton's normalisation: preferred size max_batch_size, no delay.
  EXPECT_THAT(config.dynamic_batching().preferred_batch_size(), ::testing::ElementsAre(4));
  EXPECT_EQ(config.dynamic_batching().max_queue_delay_microseconds(), 0u);
  ASSERT_EQ(config.input_size(), 2);
  EXPECT_EQ(config.input(0).name(), "a");
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(ConfigDims(config.input(0).dims()), (Shape{4}));
  EXPECT_EQ(ConfigDims(config.input(1).dims()), (Shape{2, -1}));
  ASSERT_EQ(config.output_size(), 1);
  EXPECT_EQ(ConfigDims(config.output(0).dims()), (Shape{4}));
  // Triton's SetDefaultInstanceCount: two CPU instances, named after the model.
  ASSERT_EQ(config.instance_group_size(), 1);
  EXPECT_EQ(config.instance_group(0).name(), "m");
  EXPECT_EQ(config.instance_group(0).count(), 2);
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(config.version_policy().latest().num_versions(), 1u);
  EXPECT_EQ(config.default_model_filename(), "model.onnx");
  EXPECT_TRUE(config.optimization().input_pinned_memory().enable());
  EXPECT_TRUE(config.optimization().output_pinned_memory().enable());
  EXPECT_TRUE(ValidateConfigAgainstSignature(config, BatchableSignature()).ok());
}

TEST(ModelConfigAutoComplete, NonBatchableWhenAnyFirstDimIsFixed) {
  ModelSignature sig = {{{"x", DataType::kFp32, {-1, 3}}}, {{"y", DataType::kFp32, {2, 3}}}};
  inference::ModelConfig config;
  ASSERT_TRUE(AutoCompleteConfig(sig, &config).ok());
  EXPECT_EQ(config.max_batch_size(), 0);
  EXPECT_FALSE(config.has_dynamic_batching());
  EXPECT_EQ(ConfigDims(config.input(0).dims()), (Shape{-1, 3}));
  EXPECT_EQ(ConfigDims(config.output(0).dims()), (Shape{2, 3}));
  EXPECT_TRUE(ValidateConfigAgainstSignature(config, sig).ok());
}

TEST(ModelConfigAutoComplete, BatchOnlyTensorGetsDimsOneAndEmptyReshape) {
  ModelSignature sig = {{{"v", DataType::kInt64, {-1}}}, {{"w", DataType::kInt64, {-1}}}};
  inference::ModelConfig config;
  ASSERT_TRUE(AutoCompleteConfig(sig, &config).ok());
  EXPECT_EQ(config.max_batch_size(), kDefaultMaxBatchSize);
  EXPECT_EQ(ConfigDims(config.input(0).dims()), (Shape{1}));
  EXPECT_TRUE(config.input(0).has_reshape());
  EXPECT_EQ(config.input(0).reshape().shape_size(), 0);
  EXPECT_TRUE(ValidateConfigAgainstSignature(config, sig).ok());
}

TEST(ModelConfigAutoComplete, ConfigWithBatchSizeButNoTensorsDropsBatchDim) {
  inference::ModelConfig config = Parse("max_batch_size: 2");
  ASSERT_TRUE(AutoCompleteConfig(BatchableSignature(), &config).ok());
  EXPECT_EQ(config.max_batch_size(), 2);
  EXPECT_TRUE(config.has_dynamic_batching());  // as Triton's backend: batchable, above 1
  EXPECT_EQ(ConfigDims(config.input(0).dims()), (Shape{4}));
}

TEST(ModelConfigAutoComplete, ListedInputsAndOutputsAreKeptAndTheirGapsFilled) {
  inference::ModelConfig config = Parse(
      "input [ { name: \"a\" data_type: TYPE_FP32 dims: [ -1, 4 ] }, { name: \"b\" } ] "
      "output [ { name: \"c\" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]");
  ASSERT_TRUE(AutoCompleteConfig(BatchableSignature(), &config).ok());
  EXPECT_EQ(config.max_batch_size(), 0);  // both lists given: Triton completes nothing
  EXPECT_FALSE(config.has_dynamic_batching());
  EXPECT_EQ(ConfigDims(config.input(0).dims()), (Shape{-1, 4}));
  EXPECT_EQ(config.input(1).data_type(), inference::TYPE_INT64);  // ortserve's: the gap filled
  EXPECT_EQ(ConfigDims(config.input(1).dims()), (Shape{-1, 2, -1}));
  EXPECT_TRUE(ValidateConfigAgainstSignature(config, BatchableSignature()).ok());
}

// Triton's AutoCompleteMaxBatch runs when either list is missing: listed
// inputs of a batchable model then get max_batch_size as well.
TEST(ModelConfigAutoComplete, MissingOutputsMakeABatchableModelBatch) {
  inference::ModelConfig config =
      Parse("input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 4 ] }, "
            "{ name: \"b\" data_type: TYPE_INT64 dims: [ 2, -1 ] } ]");
  ASSERT_TRUE(AutoCompleteConfig(BatchableSignature(), &config).ok());
  EXPECT_EQ(config.max_batch_size(), kDefaultMaxBatchSize);
  EXPECT_TRUE(config.has_dynamic_batching());
  ASSERT_EQ(config.output_size(), 1);
  EXPECT_EQ(ConfigDims(config.output(0).dims()), (Shape{4}));
  EXPECT_TRUE(ValidateConfigAgainstSignature(config, BatchableSignature()).ok());
}

// Triton's qa/L0_model_config autofill_noplatform/onnx/bad_max_batch_size.
TEST(ModelConfigAutoComplete, NonZeroMaxBatchSizeOnANonBatchableModelFailsAsTritons) {
  ModelSignature fixed = {{{"x", DataType::kFp32, {2, 3}}}, {{"y", DataType::kFp32, {2, 3}}}};
  inference::ModelConfig config = Parse("name: \"bad\" max_batch_size: 1");
  Status st = AutoCompleteConfig(fixed, &config);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.message(), ::testing::StartsWith("autofill failed for model 'bad': model does not support batching "
                                                  "while non-zero max_batch_size is specified"));
}

TEST(ModelConfigNormalize, FillsTritonsDefaultsAndKeepsWhatIsSet) {
  inference::ModelConfig config = Parse(R"(name: "m" max_batch_size: 8
      version_policy { all {} }
      dynamic_batching { preferred_batch_size: [ 2 ] }
      instance_group [ { kind: KIND_GPU }, { count: 3 }, { name: "own" kind: KIND_CPU } ])");
  NormalizeModelConfig(&config);
  EXPECT_TRUE(config.version_policy().has_all());
  EXPECT_THAT(config.dynamic_batching().preferred_batch_size(), ::testing::ElementsAre(2));
  ASSERT_EQ(config.instance_group_size(), 3);
  EXPECT_EQ(config.instance_group(0).name(), "m_0");
  EXPECT_EQ(config.instance_group(0).count(), 1);  // one per GPU
  EXPECT_EQ(config.instance_group(1).name(), "m_1");
  EXPECT_EQ(config.instance_group(1).kind(), inference::ModelInstanceGroup::KIND_CPU);  // KIND_AUTO
  EXPECT_EQ(config.instance_group(1).count(), 3);
  EXPECT_EQ(config.instance_group(2).name(), "own");
  EXPECT_EQ(config.instance_group(2).count(), 2);
  const std::string once = config.DebugString();
  NormalizeModelConfig(&config);
  EXPECT_EQ(config.DebugString(), once);  // idempotent

  inference::ModelConfig sequence = Parse(R"(name: "s" max_batch_size: 4 sequence_batching { oldest {} })");
  NormalizeModelConfig(&sequence);
  EXPECT_EQ(sequence.sequence_batching().max_sequence_idle_microseconds(), 1'000'000u);
  EXPECT_THAT(sequence.sequence_batching().oldest().preferred_batch_size(), ::testing::ElementsAre(4));
  EXPECT_FALSE(sequence.has_dynamic_batching());
}

TEST(ModelConfigValidate, MismatchesNameTheTensor) {
  const auto sig = BatchableSignature();
  auto check = [&](const std::string& text) {
    auto config = Parse(text);
    EXPECT_TRUE(AutoCompleteConfig(sig, &config).ok());
    return ValidateConfigAgainstSignature(config, sig);
  };
  // Triton's texts (qa/L0_model_config autofill_noplatform/onnx), ortserve's detail after.
  Status st = check(
      "max_batch_size: 4 input [ { name: \"zz\" data_type: TYPE_FP32 dims: [ 4 ] }, "
      "{ name: \"b\" data_type: TYPE_INT64 dims: [ 2, -1 ] } ]");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.message(), ::testing::StartsWith("unexpected inference input 'zz', allowed inputs are: a, b"));

  st = check("name: \"m\" max_batch_size: 4 input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 4, 1 ] }, "
             "{ name: \"b\" data_type: TYPE_INT64 dims: [ 2, -1 ] } ]");
  EXPECT_THAT(st.message(), ::testing::StartsWith(
                                "model 'm', tensor 'a': the model expects 2 dimensions (shape [-1,4]) but the model "
                                "configuration specifies 3 dimensions (an initial batch dimension because "
                                "max_batch_size > 0 followed by the explicit tensor shape, making complete shape "
                                "[-1,4,1])"));

  st = check("name: \"m\" max_batch_size: 4 input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 4 ] } ]");
  EXPECT_THAT(st.message(), ::testing::StartsWith("unable to load model 'm', configuration expects 1 inputs, "
                                                  "model provides 2"));

  st = check("max_batch_size: 4 input [ { name: \"a\" data_type: TYPE_INT32 dims: [ 4 ] }, "
             "{ name: \"b\" data_type: TYPE_INT64 dims: [ 2, -1 ] } ]");
  EXPECT_NE(st.message().find("input 'a'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("TYPE_INT32"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("TYPE_FP32"), std::string::npos) << st.message();

  st = check("max_batch_size: 4 input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 5 ] }, "
             "{ name: \"b\" data_type: TYPE_INT64 dims: [ 2, 7 ] } ]");
  EXPECT_NE(st.message().find("input 'a'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[-1,5]"), std::string::npos) << st.message();

  st = check("max_batch_size: 4 input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 4 ] } ]");
  EXPECT_NE(st.message().find("model input 'b' is missing"), std::string::npos) << st.message();

  st = check("max_batch_size: 4 output [ { name: \"nope\" data_type: TYPE_FP32 dims: [ 4 ] } ]");
  EXPECT_NE(st.message().find("output 'nope'"), std::string::npos) << st.message();

  // A model with a fixed first dim cannot batch.
  ModelSignature fixed = {{{"x", DataType::kFp32, {2, 3}}}, {{"y", DataType::kFp32, {2, 3}}}};
  auto config = Parse("max_batch_size: 4 input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 3 ] } ] "
                      "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 3 ] } ]");
  ASSERT_TRUE(AutoCompleteConfig(fixed, &config).ok());
  st = ValidateConfigAgainstSignature(config, fixed);
  EXPECT_NE(st.message().find("first dim is not dynamic"), std::string::npos) << st.message();
}

TEST(ModelConfigValidate, ReshapeIsComparedWithTheModelShape) {
  ModelSignature sig = {{{"x", DataType::kFp32, {-1, 2, 3}}}, {{"y", DataType::kFp32, {-1, 6}}}};
  auto config = Parse(R"(max_batch_size: 4
      input [ { name: "x" data_type: TYPE_FP32 dims: [ 6 ] reshape { shape: [ 2, 3 ] } } ]
      output [ { name: "y" data_type: TYPE_FP32 dims: [ 6 ] } ])");
  EXPECT_TRUE(ValidateConfigAgainstSignature(config, sig).ok());
  auto bad = Parse(R"(max_batch_size: 4
      input [ { name: "x" data_type: TYPE_FP32 dims: [ 5 ] reshape { shape: [ 2, 3 ] } } ]
      output [ { name: "y" data_type: TYPE_FP32 dims: [ 6 ] } ])");
  Status st = ValidateConfigAgainstSignature(bad, sig);
  EXPECT_NE(st.message().find("element count"), std::string::npos) << st.message();
}

TEST(ModelConfigValidate, OutputOfUnknownRankTrustsTheConfig) {
  // ORT reports rank 0 when it cannot infer an output's shape.
  ModelSignature sig = {{{"x", DataType::kFp32, {-1, 4}}}, {{"y", DataType::kFp32, {}}}};
  auto config = Parse(R"(max_batch_size: 4
      input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
      output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ])");
  EXPECT_TRUE(ValidateConfigAgainstSignature(config, sig).ok());
}

TEST(ReshapeDims, InfersOneUnknown) {
  EXPECT_EQ(ReshapeDims({2, 6}, {2, 2, 3}).value(), (Shape{2, 2, 3}));
  EXPECT_EQ(ReshapeDims({2, 6}, {2, -1}).value(), (Shape{2, 6}));
  EXPECT_EQ(ReshapeDims({4, 1}, {4}).value(), (Shape{4}));
  EXPECT_FALSE(ReshapeDims({2, 6}, {5}).ok());
  EXPECT_FALSE(ReshapeDims({2, 6}, {-1, -1}).ok());
}

// ---- version policy ---------------------------------------------------------

inference::ModelVersionPolicy Policy(const std::string& text) {
  return Parse("version_policy { " + text + " }").version_policy();
}

TEST(VersionPolicy, DefaultIsLatestOne) {
  auto s = SelectVersions(inference::ModelVersionPolicy(), {3, 1, 2});
  EXPECT_EQ(s.load, (std::vector<int64_t>{3}));
  EXPECT_TRUE(s.missing.empty());
}

TEST(VersionPolicy, LatestN) {
  EXPECT_EQ(SelectVersions(Policy("latest { num_versions: 2 }"), {1, 10, 2}).load,
            (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(SelectVersions(Policy("latest { num_versions: 5 }"), {1, 2}).load,
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(SelectVersions(Policy("latest { }"), {1, 2}).load, (std::vector<int64_t>{2}));
}

TEST(VersionPolicy, All) {
  EXPECT_EQ(SelectVersions(Policy("all { }"), {3, 1, 2}).load, (std::vector<int64_t>{1, 2, 3}));
}

TEST(VersionPolicy, SpecificReportsMissing) {
  auto s = SelectVersions(Policy("specific { versions: [ 4, 1, 9 ] }"), {1, 2, 4});
  EXPECT_EQ(s.load, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(s.missing, (std::vector<int64_t>{9}));
}

// ---- config -> runtime / scheduler options ------------------------------------

TEST(SessionSettings, ParametersAndGraphLevel) {
  auto config = Parse(R"(
    parameters { key: "intra_op_thread_count" value { string_value: "3" } }
    parameters { key: "inter_op_thread_count" value { string_value: "2" } }
    parameters { key: "execution_mode" value { string_value: "1" } }
    parameters { key: "enable_mem_arena" value { string_value: "0" } }
    parameters { key: "enable_mem_pattern" value { string_value: "false" } }
    parameters { key: "allow_spinning" value { string_value: "1" } }
    optimization { graph { level: -1 } })");
  auto s = ReadSessionSettings(config);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->intra_op_threads, 3);
  EXPECT_EQ(s->inter_op_threads, 2);
  EXPECT_EQ(s->execution_mode, ExecutionMode::kParallel);
  EXPECT_FALSE(s->enable_mem_arena);
  EXPECT_FALSE(s->enable_mem_pattern);
  EXPECT_TRUE(s->allow_spinning);
  EXPECT_EQ(s->graph_optimization_level, GraphOptimizationLevel::kBasic);

  auto defaults = ReadSessionSettings(inference::ModelConfig());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->intra_op_threads, 0);
  EXPECT_FALSE(defaults->allow_spinning);
  EXPECT_EQ(defaults->graph_optimization_level, GraphOptimizationLevel::kAll);
  EXPECT_EQ(ReadSessionSettings(Parse("optimization { graph { level: 1 } }"))->graph_optimization_level,
            GraphOptimizationLevel::kExtended);

  auto bad = ReadSessionSettings(
      Parse("parameters { key: \"intra_op_thread_count\" value { string_value: \"two\" } }"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("intra_op_thread_count"), std::string::npos);
  EXPECT_NE(bad.status().message().find("'two'"), std::string::npos);
}

TEST(InstanceGroups, CountsKindsAndGpus) {
  auto specs = ExpandInstanceGroups(Parse(R"(
    instance_group [ { count: 2 kind: KIND_CPU }, { kind: KIND_AUTO },
                     { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] } ])"));
  ASSERT_TRUE(specs.ok());
  ASSERT_EQ(specs->size(), 7u);
  EXPECT_FALSE((*specs)[0].gpu);
  EXPECT_FALSE((*specs)[2].gpu);
  EXPECT_TRUE((*specs)[3].gpu);
  EXPECT_EQ((*specs)[6].device_id, 1);
  EXPECT_EQ(ExpandInstanceGroups(inference::ModelConfig())->size(), 1u);
  EXPECT_FALSE(ExpandInstanceGroups(Parse("instance_group [ { kind: KIND_MODEL } ]")).ok());

  OrtSessionSettings settings;
  auto gpu = MakeRuntimeOptions(settings, 3, {true, 1}, "/m.onnx", "m:1#0");
  ASSERT_EQ(gpu.execution_providers.size(), 1u);
  EXPECT_EQ(gpu.execution_providers[0].name, "cuda");
  EXPECT_FALSE(gpu.allow_fallback);
  EXPECT_EQ(gpu.intra_op_threads, 3);
  EXPECT_TRUE(MakeRuntimeOptions(settings, 1, {false, 0}, "/m.onnx", "m").execution_providers.empty());
}

TEST(DynamicBatcherOptionsFromConfig, DynamicBatchingAndPriorities) {
  auto config = Parse(R"(
    name: "m" max_batch_size: 8
    dynamic_batching {
      preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100
      priority_levels: 2 default_priority_level: 2
      default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5 max_queue_size: 7 }
      priority_queue_policy { key: 1 value { max_queue_size: 3 allow_timeout_override: true } }
    })");
  auto s = MakeDynamicBatcherOptions(config, "3");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model_name, "m");
  EXPECT_EQ(s->model_version, "3");
  EXPECT_TRUE(s->batching.dynamic_batching);
  EXPECT_EQ(s->batching.preferred_batch_sizes, (std::vector<int>{4, 8}));
  EXPECT_EQ(s->batching.max_queue_delay_us, 100u);
  EXPECT_EQ(s->queueing.priority_levels, 2u);
  EXPECT_EQ(s->queueing.default_priority_level, 2u);
  EXPECT_EQ(s->queueing.default_policy.max_queue_size, 7u);
  EXPECT_EQ(s->queueing.default_policy.timeout_action, QueuePolicy::TimeoutAction::kDelay);
  ASSERT_EQ(s->queueing.level_policies.size(), 1u);
  EXPECT_EQ(s->queueing.level_policies[0].second.max_queue_size, 3u);

  EXPECT_FALSE(MakeDynamicBatcherOptions(
                   Parse("max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 8 ] }"), "1")
                   .ok());
  EXPECT_FALSE(MakeDynamicBatcherOptions(
                   Parse("max_batch_size: 4 dynamic_batching { priority_levels: 2 default_priority_level: 3 }"),
                   "1")
                   .ok());
  auto plain = MakeDynamicBatcherOptions(Parse("max_batch_size: 4"), "1");
  EXPECT_FALSE(plain->batching.dynamic_batching);
}

TEST(RuntimeConfig, InstanceBatchesAreWholeUnlessSharedIsAsked) {
  const auto with = [](const std::string& value) {
    return Parse("name: \"m\"\nmax_batch_size: 8\ndynamic_batching {}\nparameters { key: \"instance_batches\" "
                 "value { string_value: \"" + value + "\" } }\n");
  };
  auto plain = MakeDynamicBatcherOptions(Parse("name: \"m\"\nmax_batch_size: 8\ndynamic_batching {}\n"), "1");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain.value().compute.balance_across_instances);
  auto shared = MakeDynamicBatcherOptions(with("shared"), "1");
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_TRUE(shared.value().compute.balance_across_instances);
  auto whole = MakeDynamicBatcherOptions(with("whole"), "1");
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_FALSE(whole.value().compute.balance_across_instances);
  auto bad = MakeDynamicBatcherOptions(with("half"), "1");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("parameter 'instance_batches' must be 'shared' or 'whole'"));
  EXPECT_TRUE(IsKnownParameter("instance_batches"));
}

TEST(RuntimeConfig, InlineRunsHaveADefaultBoundAndZeroTurnsThemOff) {
  const auto with = [](const std::string& value) {
    return Parse("name: \"m\"\nmax_batch_size: 8\nparameters { key: \"inline_run_max_us\" "
                 "value { string_value: \"" + value + "\" } }\n");
  };
  auto plain = MakeDynamicBatcherOptions(Parse("name: \"m\"\nmax_batch_size: 8\n"), "1");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain.value().compute.inline_run_max_us, static_cast<uint64_t>(kDefaultInlineRunMaxUs));
  auto off = MakeDynamicBatcherOptions(with("0"), "1");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ(off.value().compute.inline_run_max_us, 0u);
  auto wider = MakeDynamicBatcherOptions(with("200"), "1");
  ASSERT_TRUE(wider.ok()) << wider.status().message();
  EXPECT_EQ(wider.value().compute.inline_run_max_us, 200u);
  auto bad = MakeDynamicBatcherOptions(with("fast"), "1");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("parameter 'inline_run_max_us' must be an integer >= 0"));
  EXPECT_TRUE(IsKnownParameter("inline_run_max_us"));
}

}  // namespace
}  // namespace ortserve

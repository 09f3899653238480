// End-to-end repository tests: discovery, config handling, loading real ONNX
// models (tests/data/repository, and Triton's example repository:
// TritonExamples.h), model states, lookups and inference through Model::Infer.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "repository/ModelRepository.h"

#include "RepositoryFixtures.h"
#include "TritonExamples.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;
using testing_util::DescribeIndex;
using testing_util::FindIndexEntry;

template <typename T>
Tensor MakeTensor(const std::string& name, DataType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = TensorData::Copy(values.data(), values.size() * sizeof(T));
  return t;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> out(t.data.size() / sizeof(T));
  std::memcpy(out.data(), t.data.data(), out.size() * sizeof(T));
  return out;
}

Result<InferenceResponse> Infer(Model& model, std::vector<Tensor> inputs,
                                std::vector<RequestedOutput> outputs = {}) {
  auto request = std::make_unique<InferenceRequest>();
  request->model_name = model.name();
  request->inputs = std::move(inputs);
  request->requested_outputs = std::move(outputs);
  return testing_util::InferAndWait(model, std::move(request));
}

RepositoryOptions Options(std::string path, int thread_budget) {
  RepositoryOptions options;
  options.repository_path = std::move(path);
  options.thread_budget = thread_budget;
  return options;
}

TEST(ModelStateNames, AreTritonStyle) {
  EXPECT_STREQ(ModelStateName(ModelState::kLoading), "LOADING");
  EXPECT_STREQ(ModelStateName(ModelState::kReady), "READY");
  EXPECT_STREQ(ModelStateName(ModelState::kUnavailable), "UNAVAILABLE");
  EXPECT_STREQ(ModelStateName(ModelState::kUnloading), "UNLOADING");
}

TEST(ModelRepositoryCreate, RejectsMissingFolder) {
  auto repo = ModelRepository::Create(Options("/nonexistent/ortserve/repo", 0));
  ASSERT_FALSE(repo.ok());
  EXPECT_NE(repo.status().message().find("/nonexistent/ortserve/repo"), std::string::npos);
}

class TritonExamples : public testing_util::TritonExamplesTest {};
INSTANTIATE_TRITON_EXAMPLES(TritonExamples);

TEST_P(TritonExamples, ServedInPlace) {
  auto created = ModelRepository::Create(Options(dir().string(), 2));
  ASSERT_TRUE(created.ok()) << created.status().message();
  auto& repo = *created.value();
  repo.LoadAll();
  const auto index = repo.Index();
  SCOPED_TRACE(DescribeIndex(index));
  for (const char* name : {"simple", "simple_int8", "simple_string", "simple_sequence", "simple_dyna_sequence"}) {
    const auto e = FindIndexEntry(index, name, "1");
    ASSERT_TRUE(e) << name;
    EXPECT_EQ(e->state, ModelState::kReady) << name << ": " << e->reason;
  }
  EXPECT_TRUE(repo.AllModelsReady());
  EXPECT_EQ(repo.ReadyModels().size(), 5u);

  auto simple = repo.GetModel("simple", "");
  ASSERT_TRUE(simple.ok()) << simple.status().message();
  Model& model = *simple.value();
  EXPECT_EQ(model.version(), "1");
  EXPECT_EQ(model.config().backend(), "onnxruntime");
  std::vector<int32_t> a(32), b(32);
  for (int i = 0; i < 32; ++i) {
    a[i] = i;
    b[i] = 1;
  }
  auto response = Infer(model, {MakeTensor("INPUT0", DataType::kInt32, {2, 16}, a),
                                MakeTensor("INPUT1", DataType::kInt32, {2, 16}, b)});
  ASSERT_TRUE(response.ok()) << response.status().message();
  ASSERT_EQ(response->outputs.size(), 2u);
  EXPECT_EQ(response->outputs[0].name, "OUTPUT0");
  EXPECT_EQ(response->outputs[0].shape, (Shape{2, 16}));
  EXPECT_EQ(Values<int32_t>(response->outputs[0])[5], 6);
  EXPECT_EQ(Values<int32_t>(response->outputs[1])[5], 4);

  // Validation answers synchronously with kInvalidArgument.
  auto bad = Infer(model, {MakeTensor("INPUT0", DataType::kInt32, {2, 16}, a)});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("missing input 'INPUT1'"), std::string::npos);
  EXPECT_GE(model.stats().fail.count.load(), 1u);
  repo.Shutdown();
}

class TempRepository : public testing_util::TempRepositoryTest {
 protected:
  ModelRepository& Load(int budget = 4) {
    RepositoryOptions options;
    options.thread_budget = budget;
    return StartRepository(std::move(options));
  }
};

TEST_F(TempRepository, AutoCompletesBatchableAndFixedModels) {
  AddModel("auto", "add_sub.onnx", {"1"});
  AddModel("fixed", "fixed.onnx", {"1"});
  auto& repo = Load();
  ASSERT_TRUE(repo.AllModelsReady()) << DescribeIndex(repo.Index());

  auto model = repo.GetModel("auto", "").value();
  const auto& config = model->config();
  EXPECT_EQ(config.name(), "auto");
  EXPECT_EQ(config.platform(), "onnxruntime_onnx");
  EXPECT_EQ(config.max_batch_size(), 4);  // Triton's default-max-batch-size
  EXPECT_TRUE(config.has_dynamic_batching());
  ASSERT_EQ(config.input_size(), 2);
  EXPECT_EQ(config.input(0).dims_size(), 1);
  EXPECT_EQ(config.input(0).dims(0), 4);

  std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8}, b(8, 1.0f);
  auto response = Infer(*model, {MakeTensor("INPUT0", DataType::kFp32, {2, 4}, a),
                                 MakeTensor("INPUT1", DataType::kFp32, {2, 4}, b)},
                        {{"OUTPUT1", true}});
  ASSERT_TRUE(response.ok()) << response.status().message();
  ASSERT_EQ(response->outputs.size(), 1u);
  EXPECT_EQ(response->outputs[0].name, "OUTPUT1");
  EXPECT_EQ(Values<float>(response->outputs[0])[7], 7.0f);

  auto fixed = repo.GetModel("fixed", "1").value();
  EXPECT_EQ(fixed->config().max_batch_size(), 0);
  EXPECT_FALSE(fixed->config().has_dynamic_batching());
  auto out = Infer(*fixed, {MakeTensor("X", DataType::kFp32, {2, 3}, std::vector<float>(6, 1.5f))});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>(out->outputs[0])[0], 3.0f);
}

TEST_F(TempRepository, BatchOnlyTensorsUseDimsOneWithReshape) {
  AddModel("vector", "vector.onnx", {"1"});
  auto& repo = Load();
  auto model = repo.GetModel("vector", "");
  ASSERT_TRUE(model.ok()) << DescribeIndex(repo.Index());
  auto out = Infer(*model.value(),
                   {MakeTensor("V", DataType::kInt64, {3, 1}, std::vector<int64_t>{1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->outputs[0].shape, (Shape{3, 1}));
  EXPECT_EQ(Values<int64_t>(out->outputs[0]), (std::vector<int64_t>{2, 4, 6}));
}

TEST_F(TempRepository, FailingModelsDoNotStopOthers) {
  AddModel("good", "add_sub.onnx", {"1"});
  AddModel("malformed", "add_sub.onnx", {"1"}, "name: \"malformed\"\nmax_batch_size: [ 8\n");
  AddModel("wrongtype", "add_sub.onnx", {"1"}, R"(max_batch_size: 4
      input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
              { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ])");
  AddModel("tf", "add_sub.onnx", {"1"}, "platform: \"tensorflow_graphdef\"");
  AddModel("renamed", "add_sub.onnx", {"1"}, "name: \"other\"");
  AddModel("corrupt", "", {"1"});
  std::ofstream(root_ / "corrupt" / "1" / "model.onnx") << "not an onnx file";
  AddModel("nofile", "", {"1"});
  AddModel("noversions", "", {});
  fs::create_directories(root_ / "noversions");
  AddModel(".hidden", "add_sub.onnx", {"1"});
  std::ofstream(root_ / "README.md") << "not a model";
  auto& repo = Load();
  const auto index = repo.Index();
  SCOPED_TRACE(DescribeIndex(index));

  EXPECT_EQ(FindIndexEntry(index, "good", "1")->state, ModelState::kReady);
  EXPECT_TRUE(repo.GetModel("good", "").ok());
  EXPECT_FALSE(repo.AllModelsReady());
  EXPECT_EQ(repo.ReadyModels().size(), 1u);

  const auto malformed = FindIndexEntry(index, "malformed", "");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->state, ModelState::kUnavailable);
  EXPECT_EQ(malformed->reason.rfind("config.pbtxt:2:", 0), 0u) << malformed->reason;

  const auto wrongtype = FindIndexEntry(index, "wrongtype", "1");
  ASSERT_TRUE(wrongtype);
  EXPECT_NE(wrongtype->reason.find("input 'INPUT0'"), std::string::npos);
  EXPECT_NE(wrongtype->reason.find("TYPE_INT32"), std::string::npos);

  // Config errors fail the whole model, before its versions are looked at.
  EXPECT_NE(FindIndexEntry(index, "tf", "")->reason.find("tensorflow_graphdef"), std::string::npos);
  EXPECT_EQ(FindIndexEntry(index, "renamed", "")->reason,
            "unexpected directory name 'renamed' for model 'other', directory name must equal model name");
  EXPECT_EQ(FindIndexEntry(index, "corrupt", "1")->state, ModelState::kUnavailable);
  EXPECT_NE(FindIndexEntry(index, "nofile", "1")->reason.find("model file not found"), std::string::npos);
  EXPECT_NE(FindIndexEntry(index, "noversions", "")->reason.find("no version directories"), std::string::npos);
  // Nothing names a backend and there is no model file to tell it by: Triton's words.
  EXPECT_EQ(FindIndexEntry(index, "noversions", "")->reason.rfind("Invalid model name: Could not determine backend", 0),
            0u);
  for (const auto& e : index) EXPECT_NE(e.name, ".hidden");
  EXPECT_FALSE(FindIndexEntry(index, "README.md", ""));

  auto unavailable = repo.GetModel("wrongtype", "1");
  EXPECT_EQ(unavailable.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(unavailable.status().message().find("INPUT0"), std::string::npos);
}

TEST_F(TempRepository, VersionPolicies) {
  AddModel("latest", "add_sub.onnx", {"1", "2", "10", "0", "abc", "-3"});
  AddModel("all", "fixed.onnx", {"1", "2"}, "version_policy { all { } }");
  AddModel("specific", "fixed.onnx", {"1", "2"}, "version_policy { specific { versions: [ 2, 5 ] } }");
  AddModel("custom_file", "fixed.onnx", {"1"}, "default_model_filename: \"net.onnx\"", "net.onnx");
  auto& repo = Load();
  const auto index = repo.Index();
  SCOPED_TRACE(DescribeIndex(index));

  EXPECT_EQ(FindIndexEntry(index, "latest", "10")->state, ModelState::kReady);
  EXPECT_FALSE(FindIndexEntry(index, "latest", "1"));
  EXPECT_FALSE(FindIndexEntry(index, "latest", "0"));
  EXPECT_EQ(repo.GetModel("latest", "").value()->version(), "10");
  EXPECT_EQ(repo.GetModel("latest", "2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(repo.GetModel("latest", "2").status().message(), "Request for unknown model: 'latest' version 2 is not found");

  EXPECT_EQ(FindIndexEntry(index, "all", "1")->state, ModelState::kReady);
  EXPECT_EQ(FindIndexEntry(index, "all", "2")->state, ModelState::kReady);
  EXPECT_EQ(repo.GetModel("all", "1").value()->version(), "1");
  EXPECT_EQ(repo.GetModel("all", "").value()->version(), "2");

  EXPECT_EQ(FindIndexEntry(index, "specific", "2")->state, ModelState::kReady);
  EXPECT_FALSE(FindIndexEntry(index, "specific", "1"));
  EXPECT_EQ(FindIndexEntry(index, "specific", "5")->state, ModelState::kUnavailable);
  const Status not_ready = repo.GetModel("specific", "5").status();
  EXPECT_EQ(not_ready.code(), StatusCode::kUnavailable);
  EXPECT_EQ(not_ready.message().rfind("Request for unknown model: 'specific' version 5 is not at ready state: ", 0), 0u)
      << not_ready.message();

  EXPECT_EQ(FindIndexEntry(index, "custom_file", "1")->state, ModelState::kReady);
}

TEST_F(TempRepository, ClientNamesAreNeverPaths) {
  AddModel("good", "fixed.onnx", {"1"});
  auto& repo = Load();
  for (const auto& [name, version] : std::vector<std::pair<std::string, std::string>>{
           {"../good", ""}, {"good/1", ""}, {"good", "../1"}, {"good", "01"}, {"good", "1/"},
           {root_.string() + "/good", ""}, {"", ""}}) {
    auto model = repo.GetModel(name, version);
    EXPECT_FALSE(model.ok()) << name << " / " << version;
    EXPECT_EQ(model.status().code(), StatusCode::kNotFound) << name << " / " << version;
  }
  EXPECT_EQ(repo.GetModel("nope", "").status().message(), "Request for unknown model: 'nope' is not found");
}

TEST_F(TempRepository, ConfiguredWarmupAndThreadParameters) {
  AddModel("warm", "add_sub.onnx", {"1"}, R"(max_batch_size: 4
      instance_group [ { count: 2 kind: KIND_CPU } ]
      parameters { key: "intra_op_thread_count" value { string_value: "1" } }
      model_warmup [ { name: "w" batch_size: 4 count: 2
        inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } }
        inputs { key: "INPUT1" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ])");
  AddModel("badwarm", "add_sub.onnx", {"1"}, R"(max_batch_size: 4
      model_warmup [ { name: "w" batch_size: 1
        inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "../../x" } } } ])");
  AddModel("badparam", "add_sub.onnx", {"1"},
           "parameters { key: \"execution_mode\" value { string_value: \"7\" } }");
  auto& repo = Load();
  const auto index = repo.Index();
  SCOPED_TRACE(DescribeIndex(index));
  EXPECT_EQ(FindIndexEntry(index, "warm", "1")->state, ModelState::kReady);
  EXPECT_EQ(FindIndexEntry(index, "badwarm", "1")->state, ModelState::kUnavailable);
  EXPECT_NE(FindIndexEntry(index, "badwarm", "1")->reason.find("warm-up"), std::string::npos);
  EXPECT_NE(FindIndexEntry(index, "badparam", "")->reason.find("execution_mode"), std::string::npos);
}

TEST_F(TempRepository, WarmupShapeOverflowingSixtyFourBitsFailsTheLoadNamingTheField) {
  // 2^62 FP32 elements: the element count fits in 64 bits, the byte size does not.
  AddModel("huge", "add_sub.onnx", {"1"}, R"(max_batch_size: 4
      model_warmup [ { name: "huge" batch_size: 1
        inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4611686018427387904 ] zero_data: true } }
        inputs { key: "INPUT1" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ])");
  Load();
  const auto huge = IndexEntry("huge", "1");
  ASSERT_TRUE(huge) << DescribeIndex(repo_->Index());
  EXPECT_EQ(huge->state, ModelState::kUnavailable);
  EXPECT_NE(huge->reason.find("warm-up 'huge'"), std::string::npos) << huge->reason;
  EXPECT_NE(huge->reason.find("model_warmup.inputs['INPUT0'].dims [4611686018427387904]"), std::string::npos)
      << huge->reason;
}

}  // namespace
}  // namespace ortserve

// End-to-end repository tests: discovery, config handling, loading real ONNX
// models (tests/data/repository, /work/shared/triton-examples), model states,
// lookups and inference through Model::Infer.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include <unistd.h>

#include "repository/ModelRepository.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = ORTSERVE_SOURCE_DIR;
const fs::path kTestModels = kSource / "tests" / "data" / "repository";
const fs::path kTritonExamples = kSource / ".." / "shared" / "triton-examples";

// Waits for the completion callback (the scheduler may answer on its thread).
class Completion {
 public:
  CompletionCallback Callback() {
    return [this](Result<InferenceResponse> r) {
      std::lock_guard lock(mu_);
      result_.emplace(std::move(r));
      cv_.notify_all();
    };
  }
  Result<InferenceResponse> Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return result_.has_value(); });
    return std::move(*result_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Result<InferenceResponse>> result_;
};

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
  Completion done;
  auto request = std::make_unique<InferenceRequest>();
  request->model_name = model.name();
  request->inputs = std::move(inputs);
  request->requested_outputs = std::move(outputs);
  request->on_complete = done.Callback();
  model.Infer(std::move(request));
  return done.Wait();
}

const ModelIndexEntry* Find(const std::vector<ModelIndexEntry>& index, const std::string& name,
                            const std::string& version) {
  for (const auto& e : index) {
    if (e.name == name && e.version == version) return &e;
  }
  return nullptr;
}

RepositoryOptions Options(std::string path, int thread_budget) {
  RepositoryOptions options;
  options.repository_path = std::move(path);
  options.thread_budget = thread_budget;
  return options;
}

std::string Describe(const std::vector<ModelIndexEntry>& index) {
  std::string s;
  for (const auto& e : index) {
    s += e.name + ":" + e.version + " " + ModelStateName(e.state) + " " + e.reason + "\n";
  }
  return s;
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

TEST(TritonExamples, ServedInPlace) {
  auto created = ModelRepository::Create(Options(kTritonExamples.string(), 2));
  ASSERT_TRUE(created.ok()) << created.status().message();
  auto& repo = *created.value();
  repo.LoadAll();
  const auto index = repo.Index();
  SCOPED_TRACE(Describe(index));
  for (const char* name : {"simple", "simple_int8", "simple_string"}) {
    const auto* e = Find(index, name, "1");
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->state, ModelState::kReady) << name << ": " << e->reason;
  }
  for (const char* name : {"simple_sequence", "simple_dyna_sequence"}) {
    const auto* e = Find(index, name, "1");
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->state, ModelState::kUnavailable);
    EXPECT_EQ(e->reason, "sequence batching is not supported yet");
  }
  EXPECT_FALSE(repo.AllModelsReady());
  EXPECT_EQ(repo.ReadyModels().size(), 3u);

  auto seq = repo.GetModel("simple_sequence", "");
  ASSERT_FALSE(seq.ok());
  EXPECT_EQ(seq.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(seq.status().message().find("sequence batching"), std::string::npos);

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

class TempRepository : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("ortserve_repo_" + std::to_string(::getpid()) + "_" +
             testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (repo_) repo_->Shutdown();
    repo_.reset();
    fs::remove_all(root_);
  }

  void AddModel(const std::string& name, const std::string& onnx, std::vector<std::string> versions,
                const std::string& config = "", const std::string& filename = "model.onnx") {
    for (const auto& v : versions) {
      fs::create_directories(root_ / name / v);
      if (!onnx.empty()) fs::copy_file(kTestModels / onnx, root_ / name / v / filename);
    }
    if (!config.empty()) std::ofstream(root_ / name / "config.pbtxt") << config;
  }

  ModelRepository& Load(int budget = 4) {
    auto created = ModelRepository::Create(Options(root_.string(), budget));
    EXPECT_TRUE(created.ok()) << created.status().message();
    repo_ = std::move(created).value();
    repo_->LoadAll();
    return *repo_;
  }

  fs::path root_;
  std::unique_ptr<ModelRepository> repo_;
};

TEST_F(TempRepository, AutoCompletesBatchableAndFixedModels) {
  AddModel("auto", "add_sub.onnx", {"1"});
  AddModel("fixed", "fixed.onnx", {"1"});
  auto& repo = Load();
  ASSERT_TRUE(repo.AllModelsReady()) << Describe(repo.Index());

  auto model = repo.GetModel("auto", "").value();
  const auto& config = model->config();
  EXPECT_EQ(config.name(), "auto");
  EXPECT_EQ(config.platform(), "onnxruntime_onnx");
  EXPECT_EQ(config.max_batch_size(), 8);
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
  ASSERT_TRUE(model.ok()) << Describe(repo.Index());
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
  SCOPED_TRACE(Describe(index));

  EXPECT_EQ(Find(index, "good", "1")->state, ModelState::kReady);
  EXPECT_TRUE(repo.GetModel("good", "").ok());
  EXPECT_FALSE(repo.AllModelsReady());
  EXPECT_EQ(repo.ReadyModels().size(), 1u);

  const auto* malformed = Find(index, "malformed", "");
  ASSERT_NE(malformed, nullptr);
  EXPECT_EQ(malformed->state, ModelState::kUnavailable);
  EXPECT_EQ(malformed->reason.rfind("config.pbtxt:2:", 0), 0u) << malformed->reason;

  const auto* wrongtype = Find(index, "wrongtype", "1");
  ASSERT_NE(wrongtype, nullptr);
  EXPECT_NE(wrongtype->reason.find("input 'INPUT0'"), std::string::npos);
  EXPECT_NE(wrongtype->reason.find("TYPE_INT32"), std::string::npos);

  EXPECT_NE(Find(index, "tf", "1")->reason.find("tensorflow_graphdef"), std::string::npos);
  EXPECT_NE(Find(index, "renamed", "")->reason.find("'other'"), std::string::npos);
  EXPECT_EQ(Find(index, "corrupt", "1")->state, ModelState::kUnavailable);
  EXPECT_NE(Find(index, "nofile", "1")->reason.find("model file not found"), std::string::npos);
  EXPECT_NE(Find(index, "noversions", "")->reason.find("no version directories"), std::string::npos);
  for (const auto& e : index) EXPECT_NE(e.name, ".hidden");
  EXPECT_EQ(Find(index, "README.md", ""), nullptr);

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
  SCOPED_TRACE(Describe(index));

  EXPECT_EQ(Find(index, "latest", "10")->state, ModelState::kReady);
  EXPECT_EQ(Find(index, "latest", "1"), nullptr);
  EXPECT_EQ(Find(index, "latest", "0"), nullptr);
  EXPECT_EQ(repo.GetModel("latest", "").value()->version(), "10");
  EXPECT_EQ(repo.GetModel("latest", "2").status().code(), StatusCode::kNotFound);

  EXPECT_EQ(Find(index, "all", "1")->state, ModelState::kReady);
  EXPECT_EQ(Find(index, "all", "2")->state, ModelState::kReady);
  EXPECT_EQ(repo.GetModel("all", "1").value()->version(), "1");
  EXPECT_EQ(repo.GetModel("all", "").value()->version(), "2");

  EXPECT_EQ(Find(index, "specific", "2")->state, ModelState::kReady);
  EXPECT_EQ(Find(index, "specific", "1"), nullptr);
  EXPECT_EQ(Find(index, "specific", "5")->state, ModelState::kUnavailable);

  EXPECT_EQ(Find(index, "custom_file", "1")->state, ModelState::kReady);
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
  EXPECT_NE(repo.GetModel("nope", "").status().message().find("'nope'"), std::string::npos);
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
  SCOPED_TRACE(Describe(index));
  EXPECT_EQ(Find(index, "warm", "1")->state, ModelState::kReady);
  EXPECT_EQ(Find(index, "badwarm", "1")->state, ModelState::kUnavailable);
  EXPECT_NE(Find(index, "badwarm", "1")->reason.find("warm-up"), std::string::npos);
  EXPECT_NE(Find(index, "badparam", "1")->reason.find("execution_mode"), std::string::npos);
}

}  // namespace
}  // namespace ortserve

// Request validation messages, reshape, warm-up samples and path safety.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "config/ConfigAutoComplete.h"
#include "config/ConfigChecks.h"
#include "config/ConfigParse.h"
#include "config/ConfigTypes.h"
#include "config/ModelFiles.h"
#include "repository/Warmup.h"
#include "serving/RequestValidator.h"
#include "serving/ResponseShaper.h"

#include "RepositoryFixtures.h"
#include "TestTensors.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;

inference::ModelConfig Config(const std::string& text) {
  auto c = ParseModelConfig(text);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? c.value() : inference::ModelConfig();
}

// Triton's "simple" plus an optional input and a string input.
const char* kConfig = R"(
  name: "simple"
  max_batch_size: 8
  input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
          { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1 ] },
          { name: "TEXT" data_type: TYPE_STRING dims: [ 2 ] optional: true } ]
  output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
           { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ])";

Tensor Int32(const std::string& name, Shape shape) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kInt32;
  t.shape = shape;
  t.data = TensorData::FromVector(std::vector<std::byte>(*FixedByteSize(DataType::kInt32, shape)));
  return t;
}

using testing_util::Strings;

InferenceRequest Good() {
  InferenceRequest r;
  r.model_name = "simple";
  r.inputs.push_back(Int32("INPUT0", {2, 16}));
  r.inputs.push_back(Int32("INPUT1", {2, 5}));
  return r;
}

class RequestValidation : public testing::Test {
 protected:
  // The message of a rejected request; fails the test if it was accepted.
  std::string Reject(const InferenceRequest& r) {
    Status st = ValidateRequest(config_, r);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "accepted";
    EXPECT_NE(st.message().find("model 'simple'"), std::string::npos) << st.message();
    return st.message();
  }
  inference::ModelConfig config_ = Config(kConfig);
};

TEST_F(RequestValidation, AcceptsAValidRequest) {
  EXPECT_TRUE(ValidateRequest(config_, Good()).ok());
  auto r = Good();
  r.inputs.push_back(Strings("TEXT", {2, 2}, {"a", "", "bc", "d"}));
  r.requested_outputs = {{"OUTPUT1", true}};
  Status st = ValidateRequest(config_, r);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST_F(RequestValidation, UnknownInput) {
  auto r = Good();
  r.inputs.push_back(Int32("INPUT9", {2, 16}));
  auto m = Reject(r);
  EXPECT_NE(m.find("unexpected input 'INPUT9'"), std::string::npos) << m;
  EXPECT_NE(m.find("INPUT0, INPUT1, TEXT"), std::string::npos) << m;
}

TEST_F(RequestValidation, MissingRequiredInput) {
  auto r = Good();
  r.inputs.pop_back();
  EXPECT_NE(Reject(r).find("missing input 'INPUT1'"), std::string::npos);
}

TEST_F(RequestValidation, DuplicateInput) {
  auto r = Good();
  r.inputs.push_back(Int32("INPUT0", {2, 16}));
  EXPECT_NE(Reject(r).find("'INPUT0' given more than once"), std::string::npos);
}

TEST_F(RequestValidation, WrongDatatype) {
  auto r = Good();
  r.inputs[0].dtype = DataType::kFp32;
  auto m = Reject(r);
  EXPECT_NE(m.find("input 'INPUT0'"), std::string::npos) << m;
  EXPECT_NE(m.find("expected datatype INT32, got FP32"), std::string::npos) << m;
}

TEST_F(RequestValidation, WrongRank) {
  auto r = Good();
  r.inputs[0] = Int32("INPUT0", {32});
  auto m = Reject(r);
  EXPECT_NE(m.find("expected rank 2"), std::string::npos) << m;
  EXPECT_NE(m.find("[32]"), std::string::npos) << m;
}

TEST_F(RequestValidation, WrongDims) {
  auto r = Good();
  r.inputs[0] = Int32("INPUT0", {2, 15});
  auto m = Reject(r);
  EXPECT_NE(m.find("expected shape [-1,16], got [2,15]"), std::string::npos) << m;
}

TEST_F(RequestValidation, VariableDimMatchesAnything) {
  auto r = Good();
  r.inputs[1] = Int32("INPUT1", {2, 1000});
  EXPECT_TRUE(ValidateRequest(config_, r).ok());
}

TEST_F(RequestValidation, BatchSizeAboveMaximumOrZero) {
  auto r = Good();
  r.inputs[0] = Int32("INPUT0", {9, 16});
  r.inputs[1] = Int32("INPUT1", {9, 1});
  auto m = Reject(r);
  EXPECT_NE(m.find("batch size 9 is outside [1, 8]"), std::string::npos) << m;
  r.inputs[0] = Int32("INPUT0", {0, 16});
  r.inputs[1] = Int32("INPUT1", {0, 1});
  EXPECT_NE(Reject(r).find("batch size 0"), std::string::npos);
}

TEST_F(RequestValidation, InputsMustAgreeOnBatchSize) {
  auto r = Good();
  r.inputs[1] = Int32("INPUT1", {3, 5});
  EXPECT_NE(Reject(r).find("disagree on batch size"), std::string::npos);
}

TEST_F(RequestValidation, ByteSizeMustMatchShape) {
  auto r = Good();
  r.inputs[0].data = TensorData::FromVector(std::vector<std::byte>(2 * 16 * 4 - 1));
  auto m = Reject(r);
  EXPECT_NE(m.find("needs 128 bytes, got 127"), std::string::npos) << m;
}

TEST_F(RequestValidation, BytesElementCountMustMatchShape) {
  auto r = Good();
  r.inputs.push_back(Strings("TEXT", {2, 2}, {"a", "b", "c"}));
  auto m = Reject(r);
  EXPECT_NE(m.find("needs 4 BYTES elements, got 3"), std::string::npos) << m;

  r.inputs.back().data = TensorData::FromVector(std::vector<std::byte>(3));  // truncated prefix
  EXPECT_NE(Reject(r).find("malformed BYTES"), std::string::npos);
}

TEST_F(RequestValidation, RequestedOutputs) {
  auto r = Good();
  r.requested_outputs = {{"OUTPUT7", false}};
  auto m = Reject(r);
  EXPECT_NE(m.find("unexpected requested output 'OUTPUT7'"), std::string::npos) << m;
  EXPECT_NE(m.find("OUTPUT0, OUTPUT1"), std::string::npos) << m;
  r.requested_outputs = {{"OUTPUT0", false}, {"OUTPUT0", true}};
  EXPECT_NE(Reject(r).find("output 'OUTPUT0' already exists in request"), std::string::npos);
}

TEST(RequestValidationNoBatch, FullShapeWithoutBatchDim) {
  auto config = Config(R"(name: "fixed"
      input [ { name: "X" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
      output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2, 3 ] } ])");
  InferenceRequest r;
  Tensor t;
  t.name = "X";
  t.dtype = DataType::kFp32;
  t.shape = {2, 3};
  t.data = TensorData::FromVector(std::vector<std::byte>(24));
  r.inputs.push_back(t);
  EXPECT_TRUE(ValidateRequest(config, r).ok());
  r.inputs[0].shape = {1, 2, 3};
  r.inputs[0].data = TensorData::FromVector(std::vector<std::byte>(24));
  Status st = ValidateRequest(config, r);
  EXPECT_NE(st.message().find("expected rank 2"), std::string::npos) << st.message();
}

TEST(Reshape, InputAndOutputReshapeRoundTrip) {
  auto config = Config(R"(name: "r" max_batch_size: 4
      input [ { name: "V" data_type: TYPE_INT64 dims: [ 1 ] reshape { } },
              { name: "M" data_type: TYPE_INT64 dims: [ 6 ] reshape { shape: [ 2, 3 ] } } ]
      output [ { name: "W" data_type: TYPE_INT64 dims: [ 1 ] reshape { } } ])");
  InferenceRequest r;
  Tensor v;
  v.name = "V";
  v.dtype = DataType::kInt64;
  v.shape = {3, 1};
  Tensor m = v;
  m.name = "M";
  m.shape = {3, 6};
  r.inputs = {v, m};
  ASSERT_TRUE(ApplyInputReshape(config, &r).ok());
  EXPECT_EQ(r.inputs[0].shape, (Shape{3}));
  EXPECT_EQ(r.inputs[1].shape, (Shape{3, 2, 3}));

  InferenceResponse response;
  Tensor w = v;
  w.name = "W";
  w.shape = {3};
  response.outputs.push_back(w);
  ASSERT_TRUE(HasOutputReshape(config));
  ASSERT_TRUE(ApplyOutputReshape(config, &response).ok());
  EXPECT_EQ(response.outputs[0].shape, (Shape{3, 1}));
}

// ---- warm-up -------------------------------------------------------------------

// dir_ is a model folder (with warmup/sub/ for input_data_file).
class WarmupTest : public testing_util::TempRepositoryTest {
 protected:
  void SetUp() override {
    TempRepositoryTest::SetUp();
    dir_ = root_;
    fs::create_directories(dir_ / "warmup" / "sub");
  }
  fs::path dir_;
};

TEST_F(WarmupTest, DefaultBatchSizesWithZeroData) {
  auto config = Config(R"(name: "m" max_batch_size: 8
      input [ { name: "A" data_type: TYPE_FP32 dims: [ 4, -1 ] },
              { name: "S" data_type: TYPE_STRING dims: [ 2 ] } ]
      output [ { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
      dynamic_batching { preferred_batch_size: [ 4 ] })");
  auto samples = BuildWarmupSamples(config, dir_);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 3u);  // 1, 4, 8
  const auto& last = (*samples)[2];
  EXPECT_TRUE(last.best_effort);
  EXPECT_EQ(last.inputs[0].shape, (Shape{8, 4, 1}));
  EXPECT_EQ(last.inputs[0].data.size(), 8u * 4 * 4);
  EXPECT_EQ(last.inputs[1].shape, (Shape{8, 2}));
  EXPECT_EQ(CountBytesElements(last.inputs[1].data.data(), last.inputs[1].data.size()), 16u);
}

TEST_F(WarmupTest, NonBatchingModelGetsOneSample) {
  auto config = Config(R"(name: "m"
      input [ { name: "X" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
      output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2, 3 ] } ])");
  auto samples = BuildWarmupSamples(config, dir_);
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 1u);
  EXPECT_FALSE((*samples)[0].best_effort);
  EXPECT_EQ((*samples)[0].inputs[0].shape, (Shape{2, 3}));
}

TEST_F(WarmupTest, ConfiguredSamplesZeroRandomAndFile) {
  std::vector<int32_t> values(2 * 16, 7);
  std::ofstream(dir_ / "warmup" / "sub" / "in1.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  auto config = Config(R"(name: "m" max_batch_size: 8
      input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
              { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
      output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]
      model_warmup [ { name: "w" batch_size: 2 count: 3
        inputs { key: "INPUT0" value { data_type: TYPE_INT32 dims: [ 16 ] random_data: true } }
        inputs { key: "INPUT1" value { data_type: TYPE_INT32 dims: [ 16 ] input_data_file: "sub/in1.bin" } }
      } ])");
  auto samples = BuildWarmupSamples(config, dir_);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 1u);
  const auto& s = (*samples)[0];
  EXPECT_EQ(s.count, 3);
  ASSERT_EQ(s.inputs.size(), 2u);
  for (const auto& t : s.inputs) {
    EXPECT_EQ(t.shape, (Shape{2, 16}));
    EXPECT_EQ(t.data.size(), 128u);
  }
  const Tensor& from_file = s.inputs[0].name == "INPUT1" ? s.inputs[0] : s.inputs[1];
  int32_t first = 0;
  std::memcpy(&first, from_file.data.data(), 4);
  EXPECT_EQ(first, 7);
}

TEST_F(WarmupTest, FileOfWrongSizeIsRejected) {
  std::ofstream(dir_ / "warmup" / "short.bin", std::ios::binary) << "abc";
  auto config = Config(R"(name: "m"
      input [ { name: "X" data_type: TYPE_INT32 dims: [ 4 ] } ]
      output [ { name: "Y" data_type: TYPE_INT32 dims: [ 4 ] } ]
      model_warmup [ { name: "w"
        inputs { key: "X" value { data_type: TYPE_INT32 dims: [ 4 ] input_data_file: "short.bin" } } } ])");
  auto samples = BuildWarmupSamples(config, dir_);
  ASSERT_FALSE(samples.ok());
  EXPECT_NE(samples.status().message().find("has 3 bytes"), std::string::npos)
      << samples.status().message();
}

TEST_F(WarmupTest, InputDataFileCannotEscapeTheWarmupFolder) {
  std::ofstream(dir_ / "secret.bin") << std::string(16, 'x');
  for (const std::string bad : {"../secret.bin", "/etc/passwd", "sub/../../secret.bin", ""}) {
    auto config = Config(R"(name: "m"
        input [ { name: "X" data_type: TYPE_INT32 dims: [ 4 ] } ]
        output [ { name: "Y" data_type: TYPE_INT32 dims: [ 4 ] } ]
        model_warmup [ { name: "w"
          inputs { key: "X" value { data_type: TYPE_INT32 dims: [ 4 ] input_data_file: ")" +
                         bad + R"(" } } } ])");
    auto samples = BuildWarmupSamples(config, dir_);
    EXPECT_FALSE(samples.ok()) << bad;
  }
  // A symlink inside warmup/ that points outside is refused too.
  fs::create_symlink(dir_ / "secret.bin", dir_ / "warmup" / "link.bin");
  auto link = ResolveInside(dir_ / "warmup", "link.bin");
  EXPECT_FALSE(link.ok());
  auto fine = ResolveInside(dir_ / "warmup", "sub/x.bin");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
}

TEST_F(WarmupTest, ShapesWhoseSizeOverflowsSixtyFourBitsAreRejectedNamingTheField) {
  // 2^62 FP32 elements: the element count fits in 64 bits, the byte size does not.
  auto configured = Config(R"(name: "m" max_batch_size: 2
      input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
      output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
      model_warmup [ { name: "huge" batch_size: 1
        inputs { key: "X" value { data_type: TYPE_FP32 dims: [ 4611686018427387904 ] random_data: true } } } ])");
  auto samples = BuildWarmupSamples(configured, dir_);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(samples.status().message(),
            "warm-up 'huge': model_warmup.inputs['X'].dims [4611686018427387904] give a FP32 tensor of shape "
            "[1,4611686018427387904], over 2^64 elements or bytes");

  // The default warm-up from the input's dims: BYTES elements are empty
  // strings of 4 bytes each, so 2^62 of them overflow too.
  auto defaulted = Config(R"(name: "m"
      input [ { name: "S" data_type: TYPE_STRING dims: [ 4611686018427387904 ] } ]
      output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ])");
  samples = BuildWarmupSamples(defaulted, dir_);
  ASSERT_FALSE(samples.ok());
  EXPECT_NE(samples.status().message().find("input['S'].dims [4611686018427387904]"), std::string::npos)
      << samples.status().message();
}

TEST_F(WarmupTest, WarmupInputsAreChecked) {
  auto config = Config(R"(name: "m" max_batch_size: 2
      input [ { name: "X" data_type: TYPE_INT32 dims: [ 4 ] } ]
      output [ { name: "Y" data_type: TYPE_INT32 dims: [ 4 ] } ]
      model_warmup [ { name: "w" batch_size: 3
        inputs { key: "X" value { data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } } } ])");
  EXPECT_FALSE(BuildWarmupSamples(config, dir_).ok());
  config.mutable_model_warmup(0)->set_batch_size(1);
  (*config.mutable_model_warmup(0)->mutable_inputs())["X"].set_data_type(inference::TYPE_FP32);
  EXPECT_FALSE(BuildWarmupSamples(config, dir_).ok());
}

}  // namespace
}  // namespace ortserve

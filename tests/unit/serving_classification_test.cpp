// The classification extension (serving/Classification.h): top-k per
// batch row, Triton's value printing, labels, the datatypes it refuses, and
// the labels file read at load; then through ResponseShaper, after an output
// reshape.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "config/ConfigParse.h"
#include "serving/Classification.h"
#include "serving/ResponseShaper.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

using testing_util::DecodeStrings;
using testing_util::Fp32;
namespace fs = std::filesystem;

template <typename T>
Tensor Typed(DataType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t;
  t.name = "out";
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = TensorData::Copy(values.data(), values.size() * sizeof(T));
  return t;
}

std::vector<std::string> Classified(Tensor t, uint64_t count, bool batched,
                                    const std::vector<std::string>* labels = nullptr) {
  Status s = Classify(count, batched, labels, &t);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(t.dtype, DataType::kBytes);
  return DecodeStrings(t.data);
}

TEST(Classification, TopValuesFirstPrintedAsStdToString) {
  Tensor t = Fp32("prob", {4}, {0.1f, 0.7f, 0.05f, 0.15f});
  ASSERT_TRUE(Classify(2, /*batched=*/false, nullptr, &t).ok());
  EXPECT_EQ(t.dtype, DataType::kBytes);
  EXPECT_EQ(t.shape, (Shape{2}));
  EXPECT_EQ(DecodeStrings(t.data), (std::vector<std::string>{"0.700000:1", "0.150000:3"}));
  // %f of the float widened to double, as std::to_string(float) prints it.
  EXPECT_EQ(Classified(Fp32("o", {2}, {1e-7f, 123456.789f}), 2, false),
            (std::vector<std::string>{"123456.789062:1", "0.000000:0"}));
}

TEST(Classification, LabelsAreAppendedWhereTheFileHasOne) {
  const std::vector<std::string> labels = {"cat", "", "dog"};  // index 1 has no label, 3 is past the end
  EXPECT_EQ(Classified(Fp32("o", {4}, {0.4f, 0.3f, 0.2f, 0.1f}), 4, false, &labels),
            (std::vector<std::string>{"0.400000:0:cat", "0.300000:1", "0.200000:2:dog", "0.100000:3"}));
}

TEST(Classification, BatchRowsAreClassifiedApart) {
  Tensor t = Fp32("o", {2, 3}, {1, 2, 3, 6, 5, 4});
  ASSERT_TRUE(Classify(2, /*batched=*/true, nullptr, &t).ok());
  EXPECT_EQ(t.shape, (Shape{2, 2}));
  EXPECT_EQ(DecodeStrings(t.data),
            (std::vector<std::string>{"3.000000:2", "2.000000:1", "6.000000:0", "5.000000:1"}));
}

TEST(Classification, NonBatchDimsAreFlattened) {
  // [1, 2, 2] without batching: one row of 4; with batching: 1 row of 4 too.
  Tensor unbatched = Fp32("o", {1, 2, 2}, {1, 4, 3, 2});
  ASSERT_TRUE(Classify(3, false, nullptr, &unbatched).ok());
  EXPECT_EQ(unbatched.shape, (Shape{3}));
  EXPECT_EQ(DecodeStrings(unbatched.data), (std::vector<std::string>{"4.000000:1", "3.000000:2", "2.000000:3"}));
  Tensor batched = Fp32("o", {1, 2, 2}, {1, 4, 3, 2});
  ASSERT_TRUE(Classify(3, true, nullptr, &batched).ok());
  EXPECT_EQ(batched.shape, (Shape{1, 3}));
}

TEST(Classification, CountAboveTheClassesGivesEveryClass) {
  Tensor t = Fp32("o", {2, 3}, {1, 2, 3, 3, 2, 1});
  ASSERT_TRUE(Classify(1000, true, nullptr, &t).ok());
  EXPECT_EQ(t.shape, (Shape{2, 3}));
  EXPECT_EQ(DecodeStrings(t.data).size(), 6u);
  Tensor empty_row = Fp32("o", {2, 0}, {});
  ASSERT_TRUE(Classify(5, true, nullptr, &empty_row).ok());
  EXPECT_EQ(empty_row.shape, (Shape{2, 0}));
  EXPECT_EQ(empty_row.data.size(), 0u);
}

TEST(Classification, TiesTakeTheLowerIndexAndNanComesLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Classified(Fp32("o", {5}, {0.5f, nan, 0.5f, 0.9f, 0.5f}), 5, false),
            (std::vector<std::string>{"0.900000:3", "0.500000:0", "0.500000:2", "0.500000:4", "nan:1"}));
}

TEST(Classification, IntegerTypesPrintAsIntegers) {
  EXPECT_EQ(Classified(Typed<uint8_t>(DataType::kUint8, {3}, {7, 250, 9}), 2, false),
            (std::vector<std::string>{"250:1", "9:2"}));
  EXPECT_EQ(Classified(Typed<int8_t>(DataType::kInt8, {3}, {-7, -100, 3}), 3, false),
            (std::vector<std::string>{"3:2", "-7:0", "-100:1"}));
  EXPECT_EQ(Classified(Typed<int64_t>(DataType::kInt64, {2}, {-1, 1LL << 40}), 1, false),
            (std::vector<std::string>{"1099511627776:1"}));
  EXPECT_EQ(Classified(Typed<uint64_t>(DataType::kUint64, {2}, {~0ULL, 0}), 1, false),
            (std::vector<std::string>{"18446744073709551615:0"}));
  EXPECT_EQ(Classified(Typed<double>(DataType::kFp64, {2}, {0.25, 2.5}), 2, false),
            (std::vector<std::string>{"2.500000:1", "0.250000:0"}));
}

TEST(Classification, RefusesTypesTritonCannotClassify) {
  for (DataType type : {DataType::kBool, DataType::kFp16, DataType::kBf16, DataType::kBytes}) {
    Tensor t = Typed<uint16_t>(type, {2}, {1, 2});
    if (type == DataType::kBool) t = Typed<uint8_t>(type, {2}, {0, 1});
    if (type == DataType::kBytes) t = testing_util::Strings("out", {1}, {"x"});
    Status s = Classify(1, false, nullptr, &t);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << DataTypeName(type);
    EXPECT_NE(s.message().find("output 'out' cannot be classified"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::string(DataTypeName(type))), std::string::npos) << s.message();
    EXPECT_FALSE(IsClassifiable(type));
  }
}

TEST(Classification, RefusesRowsAboveTritonsLimit) {
  std::vector<float> big(kMaxClassificationElements + 1, 0.0f);
  Tensor t = Fp32("o", {1, static_cast<int64_t>(big.size())}, big);
  Status s = Classify(1, true, nullptr, &t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
}

TEST(Classification, DataThatDoesNotMatchTheShapeIsInternal) {
  Tensor t = Fp32("o", {4}, {1, 2});
  EXPECT_EQ(Classify(1, false, nullptr, &t).code(), StatusCode::kInternal);
}

class LabelFiles : public testing::Test {
 protected:
  void SetUp() override {
    // One folder per process and test: ctest runs the tests in parallel.
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("ortserve_labels_" + std::to_string(::getpid()) + "_" + test);
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
  static inference::ModelConfig Config(const std::string& label_filename) {
    auto config = ParseModelConfig(
        R"(name: "m" output [ { name: "prob" data_type: TYPE_FP32 dims: [ 3 ] label_filename: ")" + label_filename +
        R"(" }, { name: "plain" data_type: TYPE_FP32 dims: [ 3 ] } ])");
    EXPECT_TRUE(config.ok()) << config.status().message();
    return config.value();
  }
  fs::path dir_;
};

TEST_F(LabelFiles, OneLabelPerLineAsGetlineSplitsThem) {
  Write(dir_ / "model" / "labels.txt", "cat\n\ndog");  // no final newline
  auto labels = OutputLabels::Read(Config("labels.txt"), dir_ / "model");
  ASSERT_TRUE(labels.ok()) << labels.status().message();
  ASSERT_NE(labels->Find("prob"), nullptr);
  EXPECT_EQ(*labels->Find("prob"), (std::vector<std::string>{"cat", "", "dog"}));
  EXPECT_EQ(labels->Find("plain"), nullptr);
}

TEST_F(LabelFiles, AMissingFileIsALoadErrorNamingIt) {
  auto labels = OutputLabels::Read(Config("nope.txt"), dir_ / "model");
  ASSERT_FALSE(labels.ok());
  EXPECT_EQ(labels.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(labels.status().message().find("label_filename 'nope.txt' of output 'prob'"), std::string::npos)
      << labels.status().message();
  EXPECT_NE(labels.status().message().find((dir_ / "model" / "nope.txt").string()), std::string::npos)
      << labels.status().message();
}

TEST_F(LabelFiles, AFileOutsideTheModelDirectoryIsRefused) {
  Write(dir_ / "outside.txt", "cat\n");
  for (const std::string& name : {std::string("../outside.txt"), (dir_ / "outside.txt").string()}) {
    auto labels = OutputLabels::Read(Config(name), dir_ / "model");
    ASSERT_FALSE(labels.ok()) << name;
    EXPECT_EQ(labels.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(labels.status().message().find("outside the model directory"), std::string::npos)
        << labels.status().message();
  }
}

// Through the response stage: the requested outputs are kept, reshaped back
// to the config's dims, then classified with the output's labels.
TEST(ClassificationInResponseShaper, ClassifiesTheReshapedOutputWithItsLabels) {
  auto config = ParseModelConfig(R"(
    name: "m" max_batch_size: 4
    output [ { name: "prob" data_type: TYPE_FP32 dims: [ 3 ] reshape: { shape: [ 1, 3 ] } },
             { name: "raw" data_type: TYPE_FP32 dims: [ 3 ] } ])");
  ASSERT_TRUE(config.ok()) << config.status().message();
  auto shared = std::make_shared<const inference::ModelConfig>(config.value());
  ResponseShaper shaper(shared, {"prob", "raw"});

  InferenceRequest request;
  request.requested_outputs = {{"raw", false, 0}, {"prob", true, 2}};
  InferenceResponse response;
  response.outputs = {Fp32("prob", {2, 1, 3}, {0.2f, 0.5f, 0.3f, 0.9f, 0.05f, 0.05f}),
                      Fp32("raw", {2, 3}, {1, 2, 3, 4, 5, 6})};
  ASSERT_TRUE(shaper.Shape(request, &response).ok());
  ASSERT_EQ(response.outputs.size(), 2u);
  EXPECT_EQ(response.outputs[0].dtype, DataType::kFp32);  // not classified: as it was
  EXPECT_EQ(response.outputs[1].name, "prob");
  EXPECT_EQ(response.outputs[1].shape, (Shape{2, 2}));
  EXPECT_EQ(DecodeStrings(response.outputs[1].data),
            (std::vector<std::string>{"0.500000:1", "0.300000:2", "0.900000:0", "0.050000:1"}));
  EXPECT_TRUE(response.requested[1].binary_data);
}

}  // namespace
}  // namespace ortserve

// The pure GPU-vs-CPU output comparison behind the numerical_check option.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/NumericalComparison.h"

namespace ortserve {
namespace {

using ::testing::HasSubstr;

template <typename T>
Tensor Make(const std::string& name, DataType dtype, const std::vector<T>& v) {
  return Tensor{name, dtype, {static_cast<int64_t>(v.size())}, TensorData::Copy(v.data(), v.size() * sizeof(T))};
}

TEST(CompareOutputs, IdenticalOutputsPassWithZeroError) {
  auto a = Make<float>("y", DataType::kFp32, {1, 2, 3});
  auto r = CompareOutputs({a}, {a}, 1e-6);
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.max_abs_error, 0.0);
  EXPECT_EQ(r.max_rel_error, 0.0);
}

TEST(CompareOutputs, AbsoluteNearZeroRelativeForLargeValues) {
  auto expected = Make<float>("y", DataType::kFp32, {0.0f, 1000.0f});
  // 5e-4 off at 0 (absolute), 0.5 off at 1000 (relative 5e-4): both within 1e-3.
  auto ok = Make<float>("y", DataType::kFp32, {5e-4f, 1000.5f});
  auto r = CompareOutputs({ok}, {expected}, 1e-3);
  EXPECT_TRUE(r.passed) << DescribeReport(r);
  EXPECT_NEAR(r.max_abs_error, 0.5, 1e-6);
  EXPECT_NEAR(r.max_rel_error, 5e-4, 1e-6);
  EXPECT_EQ(r.worst_output, "y");

  auto bad = Make<float>("y", DataType::kFp32, {2e-3f, 1000.5f});
  r = CompareOutputs({bad}, {expected}, 1e-3);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.worst_index, 0u);
  EXPECT_THAT(DescribeReport(r), HasSubstr("output 'y' element 0"));
}

TEST(CompareOutputs, WorstAcrossSeveralOutputs) {
  auto a1 = Make<double>("p", DataType::kFp64, {1.0, 2.0});
  auto a2 = Make<double>("q", DataType::kFp64, {3.0, 4.0});
  auto g2 = Make<double>("q", DataType::kFp64, {3.0, 4.1});
  auto r = CompareOutputs({a1, g2}, {a1, a2}, 1e-2);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.worst_output, "q");
  EXPECT_EQ(r.worst_index, 1u);
  EXPECT_NEAR(r.max_abs_error, 0.1, 1e-9);
  EXPECT_NEAR(r.max_rel_error, 0.025, 1e-9);
}

TEST(CompareOutputs, HalfAndBfloat16AreDecoded) {
  // fp16: 1.0 = 0x3c00, 1.0009765625 = 0x3c01; bf16: 1.0 = 0x3f80, 1.0078125 = 0x3f81.
  auto h1 = Make<uint16_t>("h", DataType::kFp16, {0x3c00, 0xc000 /* -2 */});
  auto h2 = Make<uint16_t>("h", DataType::kFp16, {0x3c01, 0xc000});
  auto r = CompareOutputs({h2}, {h1}, 1e-3);
  EXPECT_NEAR(r.max_abs_error, 0.0009765625, 1e-12);
  EXPECT_TRUE(r.passed);
  auto b1 = Make<uint16_t>("b", DataType::kBf16, {0x3f80});
  auto b2 = Make<uint16_t>("b", DataType::kBf16, {0x3f81});
  r = CompareOutputs({b2}, {b1}, 1e-3);
  EXPECT_NEAR(r.max_abs_error, 0.0078125, 1e-12);
  EXPECT_FALSE(r.passed);
  // A subnormal half: 0x0001 = 2^-24.
  auto s1 = Make<uint16_t>("s", DataType::kFp16, {0x0001});
  auto s0 = Make<uint16_t>("s", DataType::kFp16, {0x0000});
  EXPECT_NEAR(CompareOutputs({s1}, {s0}, 1.0).max_abs_error, std::ldexp(1.0, -24), 1e-15);
}

TEST(CompareOutputs, NanAndInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto both = Make<float>("y", DataType::kFp32, {nan, inf});
  EXPECT_TRUE(CompareOutputs({both}, {both}, 1e-6).passed);
  auto finite = Make<float>("y", DataType::kFp32, {0.0f, inf});
  auto r = CompareOutputs({both}, {finite}, 1e3);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(std::isinf(r.max_abs_error));
}

TEST(CompareOutputs, NonFloatMustMatchExactly) {
  auto i1 = Make<int64_t>("i", DataType::kInt64, {1, 2});
  auto i2 = Make<int64_t>("i", DataType::kInt64, {1, 3});
  EXPECT_TRUE(CompareOutputs({i1}, {i1}, 1.0).passed);
  auto r = CompareOutputs({i2}, {i1}, 1.0);
  EXPECT_FALSE(r.passed);
  EXPECT_THAT(r.detail, HasSubstr("'i'"));
}

TEST(CompareOutputs, StructuralMismatchFails) {
  auto a = Make<float>("y", DataType::kFp32, {1, 2});
  auto longer = Make<float>("y", DataType::kFp32, {1, 2, 3});
  auto renamed = Make<float>("z", DataType::kFp32, {1, 2});
  auto typed = Make<double>("y", DataType::kFp64, {1, 2});
  EXPECT_FALSE(CompareOutputs({a}, {}, 1.0).passed);
  EXPECT_FALSE(CompareOutputs({a}, {longer}, 1.0).passed);
  EXPECT_FALSE(CompareOutputs({a}, {renamed}, 1.0).passed);
  auto r = CompareOutputs({a}, {typed}, 1.0);
  EXPECT_FALSE(r.passed);
  EXPECT_THAT(r.detail, HasSubstr("FP64"));
}

Tensor Rows(const std::string& name, int64_t rows, const std::vector<float>& v) {
  Tensor t = Make<float>(name, DataType::kFp32, v);
  t.shape = {rows, static_cast<int64_t>(v.size()) / rows};
  return t;
}

TEST(CompareTop1, CountsRowsWhoseLargestClassAgrees) {
  // Row 0: class 2 on both; row 1: class 0 vs class 1; row 2: class 1 on both.
  auto actual = Rows("y", 3, {0.1f, 0.2f, 0.9f, 0.6f, 0.5f, 0.0f, 0.0f, 1.0f, 0.0f});
  auto expected = Rows("y", 3, {0.0f, 0.1f, 0.3f, 0.4f, 0.5f, 0.0f, 0.2f, 0.7f, 0.1f});
  auto top1 = CompareTop1(actual, expected);
  ASSERT_TRUE(top1.has_value());
  EXPECT_EQ(top1->agreeing, 2u);
  EXPECT_EQ(top1->rows, 3u);
}

TEST(CompareTop1, NoClassDimensionNoAgreement) {
  EXPECT_FALSE(CompareTop1(Make<float>("y", DataType::kFp32, {1, 2}), Make<float>("y", DataType::kFp32, {1, 2})));
  auto one_class = Rows("y", 2, {1.0f, 2.0f});
  EXPECT_FALSE(CompareTop1(one_class, one_class));
  auto ints = Make<int32_t>("y", DataType::kInt32, {1, 2, 3, 4});
  ints.shape = {2, 2};
  EXPECT_FALSE(CompareTop1(ints, ints));
  EXPECT_FALSE(CompareTop1(Rows("y", 2, {1, 2, 3, 4}), Rows("y", 1, {1, 2, 3, 4})));  // shapes differ
}

TEST(CompareOutput, OneOutputWithItsTop1AndATallyOverComparisons) {
  auto served = Rows("y", 2, {0.1f, 0.9f, 0.6f, 0.4f});
  auto close = Rows("y", 2, {0.1f, 0.9f, 0.55f, 0.45f});   // within 0.1, same classes
  auto flipped = Rows("y", 2, {0.1f, 0.9f, 0.45f, 0.55f});  // within 0.2, row 1 flips
  const OutputComparison a = CompareOutput(close, served, 0.1);
  EXPECT_FALSE(a.mismatch());
  EXPECT_FALSE(a.structural());
  const OutputComparison b = CompareOutput(flipped, served, 0.2);
  EXPECT_TRUE(b.report.passed);
  EXPECT_TRUE(b.mismatch());  // the top-1 class differs in a row
  const OutputComparison c = CompareOutput(Make<float>("y", DataType::kFp32, {1, 2}), served, 1.0);
  EXPECT_TRUE(c.structural() && c.mismatch()) << c.report.detail;
  OutputTally tally;
  for (const auto* o : {&a, &b}) tally.Add(*o);
  EXPECT_TRUE(tally.has_classes);
  EXPECT_EQ(tally.top1.agreeing, 3u);
  EXPECT_EQ(tally.top1.rows, 4u);
  EXPECT_NEAR(tally.max_abs, 0.15, 1e-6);
  const std::vector<Tensor> answer = {Make<float>("x", DataType::kFp32, {1}), served};
  EXPECT_EQ(FindTensor(answer, "y"), &answer[1]);
  EXPECT_EQ(FindTensor(answer, "z"), nullptr);
}

}  // namespace
}  // namespace ortserve

#include <gtest/gtest.h>

#include <cstring>

#include "scheduler/TensorStacker.h"

namespace ortserve {
namespace {

Tensor Int32(Shape shape, std::vector<int32_t> v, std::string name = "x") {
  return {std::move(name), DataType::kInt32, std::move(shape), TensorData::Copy(v.data(), v.size() * 4)};
}

std::vector<int32_t> Ints(const Tensor& t) {
  std::vector<int32_t> v(t.data.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

Tensor Bytes(Shape shape, const std::vector<std::string>& strings) {
  std::vector<std::byte> b;
  for (const auto& s : strings) {
    uint32_t n = static_cast<uint32_t>(s.size());
    b.insert(b.end(), reinterpret_cast<std::byte*>(&n), reinterpret_cast<std::byte*>(&n) + 4);
    b.insert(b.end(), reinterpret_cast<const std::byte*>(s.data()),
             reinterpret_cast<const std::byte*>(s.data()) + s.size());
  }
  return {"s", DataType::kBytes, std::move(shape), TensorData::FromVector(std::move(b))};
}

InferenceRequest With(std::vector<Tensor> inputs) {
  InferenceRequest r;
  r.inputs = std::move(inputs);
  return r;
}

TEST(CanStack, NeedsSameNamesDtypesAndNonBatchDims) {
  auto a = With({Int32({1, 2}, {1, 2}, "x"), Int32({1, 1}, {3}, "y")});
  auto reordered = With({Int32({3, 1}, {0, 0, 0}, "y"), Int32({3, 2}, {0, 0, 0, 0, 0, 0}, "x")});
  EXPECT_TRUE(CanStack(a, reordered));
  EXPECT_FALSE(CanStack(a, With({Int32({1, 3}, {1, 2, 3}, "x"), Int32({1, 1}, {3}, "y")})));
  EXPECT_FALSE(CanStack(a, With({Int32({1, 2}, {1, 2}, "x"), Int32({1, 1}, {3}, "z")})));
  EXPECT_FALSE(CanStack(a, With({Int32({1, 2}, {1, 2}, "x")})));
  auto fp = With({Int32({1, 2}, {1, 2}, "x"), Int32({1, 1}, {3}, "y")});
  fp.inputs[1].dtype = DataType::kFp32;
  EXPECT_FALSE(CanStack(a, fp));
}

TEST(TensorStacker, StacksFixedSizeAndBytesAlongDimZero) {
  auto a = With({Int32({1, 2}, {1, 2}), Bytes({1}, {"a"})});
  auto b = With({Bytes({2}, {"bc", ""}), Int32({2, 2}, {3, 4, 5, 6})});
  TensorStacker stacker;
  std::vector<Tensor> batched;
  ASSERT_TRUE(stacker.Stack({&a, &b}, &batched).ok());
  ASSERT_EQ(batched.size(), 2u);
  EXPECT_EQ(batched[0].shape, (Shape{3, 2}));
  EXPECT_EQ(Ints(batched[0]), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(batched[1].shape, (Shape{3}));
  EXPECT_EQ(batched[1].data.size(), Bytes({3}, {"a", "bc", ""}).data.size());
  EXPECT_EQ(0, std::memcmp(batched[1].data.data(), Bytes({3}, {"a", "bc", ""}).data.data(),
                           batched[1].data.size()));
}

TEST(TensorStacker, OneRequestIsPassedThroughWithoutCopy) {
  auto a = With({Int32({2, 1}, {1, 2})});
  TensorStacker stacker;
  std::vector<Tensor> batched;
  ASSERT_TRUE(stacker.Stack({&a}, &batched).ok());
  EXPECT_EQ(batched[0].data.data(), a.inputs[0].data.data());
}

TEST(TensorStacker, RejectsDataThatDisagreesWithItsShape) {
  auto a = With({Int32({1, 2}, {1, 2})});
  auto b = With({Int32({1, 2}, {1})});
  TensorStacker stacker;
  std::vector<Tensor> batched;
  EXPECT_EQ(stacker.Stack({&a, &b}, &batched).code(), StatusCode::kInvalidArgument);
}

TEST(TensorStacker, SplitsSharingTheOutputBuffer) {
  Tensor out = Int32({3, 2}, {1, 2, 3, 4, 5, 6}, "y");
  Tensor strings = Bytes({3, 1}, {"x", "yy", "zzz"});
  std::vector<std::vector<Tensor>> parts;
  ASSERT_TRUE(TensorStacker::Split({out, strings}, {2, 1}, &parts).ok());
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0][0].shape, (Shape{2, 2}));
  EXPECT_EQ(Ints(parts[0][0]), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(Ints(parts[1][0]), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(parts[1][0].data.data(), out.data.data() + 16);  // a view, not a copy
  EXPECT_EQ(parts[0][1].shape, (Shape{2, 1}));
  EXPECT_EQ(parts[0][1].data.size(), 4u + 1 + 4 + 2);
  EXPECT_EQ(parts[1][1].data.size(), 4u + 3);
  EXPECT_EQ(parts[1][1].data.data(), strings.data.data() + 11);
}

TEST(TensorStacker, SplitRejectsAWrongBatchDimensionNamingTheOutput) {
  std::vector<std::vector<Tensor>> parts;
  Status s = TensorStacker::Split({Int32({2, 1}, {1, 2}, "probs")}, {2, 1}, &parts);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("'probs'"), std::string::npos);
  Tensor broken = Bytes({2}, {"a"});  // one element for a shape of two
  EXPECT_EQ(TensorStacker::Split({broken}, {1, 1}, &parts).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace ortserve

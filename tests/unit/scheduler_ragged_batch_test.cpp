// Ragged batching's batch side (scheduler/RaggedBatch.h): ragged inputs
// concatenated to 1-D, the batch inputs of each kind, a batch output
// scattered in its source input's shapes.
#include "scheduler/RaggedBatch.h"

#include <gtest/gtest.h>

#include <cstring>

#include "TestTensors.h"
#include "scheduler/TensorStacker.h"

namespace ortserve {
namespace {

using testing_util::Floats;
using testing_util::Fp32;

InferenceRequest Request(Shape shape) {
  InferenceRequest r;
  r.id = ShapeToString(shape);
  std::vector<float> values(*ElementCount(shape));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(values.size() * 10 + i);
  r.inputs.push_back(Fp32("x", shape, values));
  return r;
}

std::vector<int32_t> Ints(const Tensor& t) {
  std::vector<int32_t> v(t.data.size() / sizeof(int32_t));
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

RaggedBatching RaggedX() {
  RaggedBatching ragged;
  ragged.ragged_inputs = {"x"};
  return ragged;
}

TEST(RaggedBatch, RaggedInputsStackWhateverTheirShapesIntoOneFlatTensor) {
  const RaggedBatching ragged = RaggedX();
  const InferenceRequest a = Request({1, 2});
  const InferenceRequest b = Request({1, 3});
  EXPECT_FALSE(CanStack(a, b));
  EXPECT_TRUE(CanStack(a, b, &ragged));
  TensorStacker stacker;
  std::vector<Tensor> batch;
  ASSERT_TRUE(stacker.Stack({&a, &b}, &batch, &ragged).ok());
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].shape, (Shape{5}));
  EXPECT_EQ(Floats(batch[0]), (std::vector<float>{20, 21, 30, 31, 32}));
  ASSERT_TRUE(stacker.Stack({&b}, &batch, &ragged).ok());
  EXPECT_EQ(batch[0].shape, (Shape{3}));
}

TEST(RaggedBatch, EachBatchInputKindDescribesTheBatch) {
  const InferenceRequest a = Request({1, 2});
  const InferenceRequest b = Request({2, 3});
  struct Case {
    BatchInputKind kind;
    Shape shape;
    std::vector<int32_t> values;
  };
  const Case cases[] = {
      {BatchInputKind::kElementCount, {2}, {2, 6}},
      {BatchInputKind::kAccumulatedElementCount, {2}, {2, 8}},
      {BatchInputKind::kAccumulatedElementCountWithZero, {3}, {0, 2, 8}},
      {BatchInputKind::kMaxElementCountAsShape, {6}, {0, 0, 0, 0, 0, 0}},
      {BatchInputKind::kItemShape, {3, 1}, {2, 3, 3}},
      {BatchInputKind::kItemShapeFlatten, {3}, {2, 3, 3}},
  };
  for (const Case& c : cases) {
    RaggedBatching ragged = RaggedX();
    ragged.batch_inputs.push_back({c.kind, {"B", "B2"}, DataType::kInt32, "x"});
    std::vector<Tensor> inputs;
    ASSERT_TRUE(AppendBatchInputs(ragged, {&a, &b}, &inputs).ok());
    ASSERT_EQ(inputs.size(), 2u);  // one per target
    EXPECT_EQ(inputs[1].name, "B2");
    EXPECT_EQ(inputs[0].shape, c.shape) << static_cast<int>(c.kind);
    EXPECT_EQ(Ints(inputs[0]), c.values) << static_cast<int>(c.kind);
  }
  RaggedBatching fp32 = RaggedX();
  fp32.batch_inputs.push_back({BatchInputKind::kElementCount, {"B"}, DataType::kFp32, "x"});
  std::vector<Tensor> inputs;
  ASSERT_TRUE(AppendBatchInputs(fp32, {&a, &b}, &inputs).ok());
  EXPECT_EQ(Floats(inputs[0]), (std::vector<float>{2, 6}));
  fp32.batch_inputs[0].source = "missing";
  EXPECT_EQ(AppendBatchInputs(fp32, {&a}, &inputs).code(), StatusCode::kInvalidArgument);
}

TEST(RaggedBatch, BatchOutputsScatterInTheSourceShapesOthersSplitByRows) {
  RaggedBatching ragged = RaggedX();
  ragged.batch_outputs.push_back({{"y"}, "x"});
  const InferenceRequest a = Request({1, 2});
  const InferenceRequest b = Request({1, 3});
  const std::vector<Tensor> outputs = {Fp32("y", {5}, {1, 2, 3, 4, 5}), Fp32("s", {2, 1}, {7, 8})};
  std::vector<std::vector<Tensor>> parts;
  ASSERT_TRUE(SplitRaggedOutputs(ragged, outputs, {"y", "s"}, {1, 1}, {&a, &b}, &parts).ok());
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1][0].shape, (Shape{1, 3}));
  EXPECT_EQ(Floats(parts[1][0]), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(Floats(parts[0][1]), (std::vector<float>{7}));
  const std::vector<Tensor> short_output = {Fp32("y", {4}, {1, 2, 3, 4}), outputs[1]};
  Status st = SplitRaggedOutputs(ragged, short_output, {"y", "s"}, {1, 1}, {&a, &b}, &parts);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("output 'y' holds 4 elements, but the batch's source inputs hold 5"), std::string::npos);
}

}  // namespace
}  // namespace ortserve

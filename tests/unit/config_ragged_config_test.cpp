// Ragged batching's config side (config/RaggedConfig.h): what the
// batcher is told, and the checks against the model's signature.
#include "config/RaggedConfig.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/ConfigParse.h"
#include "config/SequenceConfig.h"

#include "ParsedConfig.h"

namespace ortserve {
namespace {

using ::testing::HasSubstr;

constexpr const char* kRagged = R"(name: "m" max_batch_size: 8
    input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
    output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
    batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: [ "ENDS", "ENDS2" ]
                    data_type: TYPE_INT32 source_input: "X" } ]
    batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "Y" source_input: "X" } ])";

ModelSignature Signature(Shape x_shape, DataType ends_type = DataType::kInt32) {
  ModelSignature s;
  s.inputs = {{"X", DataType::kFp32, std::move(x_shape)}, {"ENDS", ends_type, {-1}}, {"ENDS2", DataType::kInt32, {-1}}};
  s.outputs = {{"Y", DataType::kFp32, {-1}}};
  return s;
}

TEST(RaggedConfig, TheBatcherIsToldTheRaggedInputsBatchInputsAndOutputs) {
  EXPECT_EQ(MakeRaggedBatching(Parse(R"(name: "m" max_batch_size: 8)")), nullptr);
  const auto ragged = MakeRaggedBatching(Parse(kRagged));
  ASSERT_NE(ragged, nullptr);
  EXPECT_TRUE(ragged->IsRagged("X"));
  ASSERT_EQ(ragged->batch_inputs.size(), 1u);
  EXPECT_EQ(ragged->batch_inputs[0].kind, BatchInputKind::kAccumulatedElementCountWithZero);
  EXPECT_EQ(ragged->batch_inputs[0].targets, (std::vector<std::string>{"ENDS", "ENDS2"}));
  ASSERT_NE(ragged->ScatterSource("Y"), nullptr);
  EXPECT_EQ(*ragged->ScatterSource("Y"), "X");
  EXPECT_TRUE(IsServerFedInput(Parse(kRagged), "ENDS2"));
  EXPECT_FALSE(IsServerFedInput(Parse(kRagged), "X"));
}

TEST(RaggedConfig, ChecksAgainstTheModel) {
  const auto config = Parse(kRagged);
  EXPECT_TRUE(CheckRaggedAgainstModel(config, Signature({-1})).ok());
  EXPECT_THAT(CheckRaggedAgainstModel(config, Signature({-1, -1})).message(),
              HasSubstr("configuration expects model provides input with shape [-1]  for ragged input 'X', model "
                        "provides [-1,-1]"));
  EXPECT_THAT(CheckRaggedAgainstModel(config, Signature({-1}, DataType::kFp32)).message(),
              HasSubstr("batch input 'ENDS' is TYPE_INT32 in the config but TYPE_FP32 in the model"));
  ModelSignature no_target = Signature({-1});
  no_target.inputs.pop_back();
  EXPECT_THAT(CheckRaggedAgainstModel(config, no_target).message(),
              HasSubstr("batch input target_name 'ENDS2' is not an input of the model"));
  auto sequence = config;
  sequence.mutable_sequence_batching();
  EXPECT_THAT(CheckRaggedAgainstModel(sequence, Signature({-1})).message(),
              HasSubstr("runs under the dynamic batcher only"));
}

}  // namespace
}  // namespace ortserve

// An ensemble's load-time checks (config/EnsembleGraph.h): the config
// alone (fields, tensors produced twice, cycles, data flow), then against its
// composing models' configs (names, mappings, data types, shapes, batch
// sizes); every failure names the step or tensor. And the plan they yield.
#include <gtest/gtest.h>

#include <string>

#include "config/ConfigParse.h"
#include "config/EnsembleGraph.h"

#include "ParsedConfig.h"

namespace ortserve {
namespace {

std::string Step(const std::string& model, const std::string& inputs, const std::string& outputs) {
  return "{ model_name: \"" + model + "\" model_version: -1 " + inputs + " " + outputs + " }";
}

std::string In(const std::string& key, const std::string& value) {
  return "input_map { key: \"" + key + "\" value: \"" + value + "\" }";
}

std::string Out(const std::string& key, const std::string& value) {
  return "output_map { key: \"" + key + "\" value: \"" + value + "\" }";
}

// name "e", batching, FP32 [4] inputs and outputs as listed.
inference::ModelConfig Ensemble(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                                const std::vector<std::string>& steps, const std::string& extra = "") {
  std::string text = "name: \"e\" platform: \"ensemble\" max_batch_size: 8\n" + extra;
  for (const auto& i : inputs) text += "input { name: \"" + i + "\" data_type: TYPE_FP32 dims: [ 4 ] }\n";
  for (const auto& o : outputs) text += "output { name: \"" + o + "\" data_type: TYPE_FP32 dims: [ 4 ] }\n";
  text += "ensemble_scheduling { step [ ";
  for (size_t i = 0; i < steps.size(); ++i) text += (i ? ", " : "") + steps[i];
  return Parse(text + " ] }");
}

// A composing model: FP32 [4] X -> Y unless told otherwise.
inference::ModelConfig Model(const std::string& name, int max_batch_size = 8, const std::string& type = "TYPE_FP32",
                             const std::string& dims = "4", const std::string& extra_input = "") {
  return Parse("name: \"" + name + "\" max_batch_size: " + std::to_string(max_batch_size) +
               " input { name: \"X\" data_type: " + type + " dims: [ " + dims + " ] } " + extra_input +
               " output { name: \"Y\" data_type: " + type + " dims: [ " + dims + " ] }");
}

void ExpectFails(const Status& status, const std::vector<std::string>& texts) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  for (const auto& text : texts) EXPECT_NE(status.message().find(text), std::string::npos) << status.message();
}

// a (IN -> t), then b and c both on t (fan-out), d joins them (fan-in);
// listed out of order.
inference::ModelConfig Diamond() {
  return Ensemble({"IN"}, {"OUT"},
                  {Step("d", In("X", "u") + In("Z", "v"), Out("Y", "OUT")), Step("b", In("X", "t"), Out("Y", "u")),
                   Step("c", In("X", "t"), Out("Y", "v")), Step("a", In("X", "IN"), Out("Y", "t"))});
}

TEST(EnsembleGraph, ADiamondListedOutOfOrderIsValid) {
  EXPECT_TRUE(CheckEnsembleScheduling(Diamond()).ok()) << CheckEnsembleScheduling(Diamond()).message();
}

TEST(EnsembleGraph, ConfigFieldsOfAnEnsemble) {
  ExpectFails(CheckEnsembleScheduling(Parse("name: \"e\" platform: \"ensemble\"")),
              {"ensemble scheduling must be set for ensemble e"});
  ExpectFails(CheckEnsembleScheduling(Parse("name: \"e\" platform: \"ensemble\" backend: \"onnxruntime\"")),
              {"Ensemble model 'e' must have platform type 'ensemble' and empty backend type"});
  ExpectFails(CheckEnsembleScheduling(Parse("name: \"e\" ensemble_scheduling { step [] }")),
              {"ensemble scheduling cannot be set for model 'e' whose platform is not ensemble"});
  ExpectFails(CheckEnsembleScheduling(Ensemble({"IN"}, {"OUT"}, {}, "instance_group { count: 1 }")),
              {"instance group should not be specified for ensemble 'e'"});
  ExpectFails(CheckEnsembleScheduling(Ensemble({"IN"}, {"OUT"}, {})), {"must specify 'step' for ensemble 'e'"});
  ExpectFails(CheckEnsembleScheduling(Ensemble({"IN"}, {"OUT"}, {Step("a", "", Out("Y", "OUT"))})),
              {"must specify 'input_map' in step 0 of ensemble 'e'"});
  ExpectFails(CheckEnsembleScheduling(Ensemble({"IN"}, {"OUT"}, {"{ model_name: \"\" }"})),
              {"must specify 'model_name' in step 0"});
}

TEST(EnsembleGraph, ATensorProducedTwiceNamesBothSteps) {
  auto config = Ensemble({"IN"}, {"OUT"},
                         {Step("a", In("X", "IN"), Out("Y", "OUT")), Step("b", In("X", "IN"), Out("Y", "OUT"))});
  ExpectFails(CheckEnsembleScheduling(config), {"ensemble tensor 'OUT' can appear in an output map only once",
                                                "step 1", "already produced by step 0 (model 'a')"});
}

TEST(EnsembleGraph, ACycleIsNamedStepByStep) {
  auto config = Ensemble({"IN"}, {"OUT"},
                         {Step("a", In("X", "IN") + In("Z", "t1"), Out("Y", "t0")), Step("b", In("X", "t0"), Out("Y", "t1")),
                          Step("c", In("X", "t0"), Out("Y", "OUT"))});
  ExpectFails(CheckEnsembleScheduling(config),
              {"ensemble 'e' has a cycle: step 0 (model 'a') -> step 1 (model 'b') -> step 0 (model 'a')"});
  auto itself = Ensemble({"IN"}, {"OUT"}, {Step("a", In("X", "IN"), Out("Y", "t")), Step("e", In("X", "t"), Out("Y", "OUT"))});
  ExpectFails(CheckEnsembleScheduling(itself), {"circular dependency between ensembles: e -> ... -> e -> e",
                                                "ensemble 'e' has a cycle: step 1 (model 'e') runs the ensemble itself"});
}

TEST(EnsembleGraph, DataFlowErrorsNameTheTensor) {
  ExpectFails(CheckEnsembleScheduling(Ensemble({"IN", "EXTRA"}, {"OUT"}, {Step("a", In("X", "IN"), Out("Y", "OUT"))})),
              {"ensemble input 'EXTRA' for ensemble e' is not used"});
  ExpectFails(CheckEnsembleScheduling(Ensemble({"IN"}, {"OUT", "NOPE"}, {Step("a", In("X", "IN"), Out("Y", "OUT"))})),
              {"ensemble output 'NOPE' for ensemble e' is not used"});
  ExpectFails(CheckEnsembleScheduling(
                  Ensemble({"IN"}, {"OUT"}, {Step("a", In("X", "IN") + In("Z", "ghost"), Out("Y", "OUT"))})),
              {"output 'OUT' for ensemble 'e' is not written: at least one of its depending tensors, 'ghost', is "
               "not connected"});
  ExpectFails(CheckEnsembleScheduling(Ensemble({"IN"}, {"OUT"},
                                               {Step("a", In("X", "IN"), Out("Y", "OUT")),
                                                Step("b", In("X", "IN"), Out("Y", "dangling"))})),
              {"ensemble tensor 'dangling' is unused in ensemble 'e'", "step 1 (model 'b') produces it"});
  ExpectFails(CheckEnsembleScheduling(Ensemble({"IN"}, {"OUT"},
                                               {Step("a", In("X", "IN"), Out("Y", "OUT")),
                                                Step("b", In("X", "OUT"), Out("Y", "IN"))})),
              {"ensemble input 'IN'", "is also produced by step 1 (model 'b')"});
}

TEST(EnsembleGraph, TheDiamondAgreesWithItsModels) {
  auto d = Model("d", 8, "TYPE_FP32", "4", "input { name: \"Z\" data_type: TYPE_FP32 dims: [ 4 ] }");
  auto a = Model("a"), b = Model("b"), c = Model("c");
  EXPECT_TRUE(CheckEnsembleAgainstModels(Diamond(), {&d, &b, &c, &a}).ok());
  // A non-batching model whose dims carry the batch dimension fits too.
  auto c_flat = Model("c", 0, "TYPE_FP32", "-1, 4");
  EXPECT_TRUE(CheckEnsembleAgainstModels(Diamond(), {&d, &b, &c_flat, &a}).ok());
}

TEST(EnsembleGraph, MappingErrorsNameTheStep) {
  auto one = Ensemble({"IN"}, {"OUT"}, {Step("a", In("X", "IN"), Out("Y", "OUT"))});
  auto ints = Model("a", 8, "TYPE_INT32");
  ExpectFails(CheckEnsembleAgainstModels(one, {&ints}),
              {"in ensemble e, step 0 (model 'a'), ensemble tensor IN: inconsistent data type: TYPE_FP32 is inferred "
               "from model e while TYPE_INT32 is inferred from model a"});
  auto three = Model("a", 8, "TYPE_FP32", "3");
  ExpectFails(CheckEnsembleAgainstModels(one, {&three}), {"step 0 (model 'a')", "inconsistent shape: [-1,4]", "[-1,3]"});
  auto small = Model("a", 4);
  ExpectFails(CheckEnsembleAgainstModels(one, {&small}),
              {"ensemble e allows maximum batch size 8, but it contains model a which only allows maximum batch "
               "size to be 4"});
  auto two_inputs = Model("a", 8, "TYPE_FP32", "4", "input { name: \"Z\" data_type: TYPE_FP32 dims: [ 4 ] }");
  ExpectFails(CheckEnsembleAgainstModels(one, {&two_inputs}),
              {"step 0 (model 'a')", "input Z in model a is not mapped to any ensemble tensors"});
  auto wrong_names = Ensemble({"IN"}, {"OUT"}, {Step("a", In("NOPE", "IN"), Out("Y", "OUT"))});
  auto a = Model("a");
  ExpectFails(CheckEnsembleAgainstModels(wrong_names, {&a}),
              {"ensemble tensor IN is mapping to non-existing input NOPE in model a"});
  auto wrong_output = Ensemble({"IN"}, {"OUT"}, {Step("a", In("X", "IN"), Out("NOPE", "OUT"))});
  ExpectFails(CheckEnsembleAgainstModels(wrong_output, {&a}),
              {"ensemble tensor OUT is mapped from non-existing output NOPE in model a"});
}

TEST(EnsembleGraph, ShapesMustAgreeBetweenSteps) {
  // a's [4] output feeds b's [3] input.
  auto config = Ensemble({"IN"}, {"OUT"}, {Step("a", In("X", "IN"), Out("Y", "t")), Step("b", In("X", "t"), Out("Y", "OUT"))});
  auto a = Model("a");
  auto b = Model("b", 8, "TYPE_FP32", "3");
  ExpectFails(CheckEnsembleAgainstModels(config, {&a, &b}),
              {"step 1 (model 'b'), ensemble tensor t: inconsistent shape: [-1,4] is inferred from model a"});
}

TEST(EnsembleGraph, ThePlanKeepsStepsMappingsAndOrder) {
  EnsemblePlan plan = MakeEnsemblePlan(Diamond());
  ASSERT_EQ(plan.steps.size(), 4u);
  EXPECT_EQ(plan.name, "e");
  EXPECT_EQ(plan.steps[0].model_name, "d");
  EXPECT_EQ(plan.steps[0].model_version, -1);
  ASSERT_EQ(plan.steps[0].inputs.size(), 2u);
  EXPECT_EQ(plan.steps[0].inputs[0], (std::pair<std::string, std::string>("X", "u")));
  EXPECT_EQ(plan.steps[3].outputs[0], (std::pair<std::string, std::string>("Y", "t")));
  EXPECT_EQ(plan.inputs, std::vector<std::string>{"IN"});
  EXPECT_EQ(plan.outputs, std::vector<std::string>{"OUT"});
  EXPECT_EQ(StepLabel(2, "c"), "step 2 (model 'c')");
}

}  // namespace
}  // namespace ortserve

// A stateful model served from a repository folder: sequence_batching read
// from config.pbtxt, checked against the model file (accumulator.onnx:
// OUTPUT = INPUT + STATE_IN, STATE_OUT = OUTPUT), its state fed back through
// the served model, and each config mistake refused at load naming the field.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "RepositoryFixtures.h"
#include "TestTensors.h"

namespace ortserve {
namespace {

using namespace testing_util;

// The accumulator with implicit state; `extra` goes inside sequence_batching,
// `state_extra` inside its state entry, `tail` after everything.
std::string AccumulatorConfig(const std::string& strategy = "oldest { max_candidate_sequences: 4 }",
                              const std::string& state_extra = "", const std::string& tail = "") {
  return "name: \"acc\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: 4\n"
         "sequence_batching {\n  " + strategy +
         "\n  state [ { input_name: \"STATE_IN\" output_name: \"STATE_OUT\" data_type: TYPE_FP32 dims: [ 1 ] " +
         state_extra + " } ]\n}\n" + tail;
}

class SequenceModelTest : public TempRepositoryTest {
 protected:
  Model& LoadReady(const std::string& config) {
    AddModel("acc", "accumulator.onnx", {"1"}, config);
    StartRepository({});
    auto e = IndexEntry("acc");
    EXPECT_TRUE(e && e->state == ModelState::kReady) << DescribeIndex(repo_->Index());
    auto model = repo_->GetModel("acc", "");
    EXPECT_TRUE(model.ok()) << model.status().message();
    model_ = model.ok() ? model.value() : nullptr;
    return *model_;
  }
  // The reason `config` leaves the model UNAVAILABLE.
  std::string LoadFails(const std::string& config) {
    AddModel("acc", "accumulator.onnx", {"1"}, config);
    StartRepository({});
    auto e = IndexEntry("acc");
    EXPECT_TRUE(e && e->state == ModelState::kUnavailable) << DescribeIndex(repo_->Index());
    return e ? e->reason : "";
  }
  Result<InferenceResponse> Step(float value, uint64_t sequence, bool start = false, bool end = false,
                                 std::vector<Tensor> extra = {}) {
    auto r = std::make_unique<InferenceRequest>();
    r->model_name = "acc";
    r->id = "step";
    r->inputs.push_back(Fp32("INPUT", {1, 1}, {value}));
    for (Tensor& t : extra) r->inputs.push_back(std::move(t));
    r->sequence.id = sequence;
    r->sequence.start = start;
    r->sequence.end = end;
    return InferAndWait(*model_, std::move(r));
  }
  // OUTPUT of a step that must succeed, and that it is the only output.
  float Output(const Result<InferenceResponse>& r) {
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return -1;
    EXPECT_EQ(r->outputs.size(), 1u);  // STATE_OUT is the server's
    EXPECT_EQ(r->outputs.at(0).name, "OUTPUT");
    return Floats(r->outputs.at(0)).at(0);
  }

  std::shared_ptr<Model> model_;
};

TEST_F(SequenceModelTest, StateIsFedBackFromTheInitialStateFile) {
  AddVersion("acc", "1", "accumulator.onnx");
  std::filesystem::create_directories(root_ / "acc" / "initial_state");
  const float initial = 100;
  std::ofstream(root_ / "acc" / "initial_state" / "hundred", std::ios::binary)
      .write(reinterpret_cast<const char*>(&initial), sizeof(initial));
  // No input/output lists: auto-complete fills INPUT and OUTPUT only.
  Model& model = LoadReady(AccumulatorConfig(
      "oldest { max_candidate_sequences: 4 }",
      "initial_state: { data_type: TYPE_FP32 dims: [ 1 ] name: \"h\" data_file: \"hundred\" }"));
  ASSERT_EQ(model.config().input_size(), 1);
  EXPECT_EQ(model.config().input(0).name(), "INPUT");
  ASSERT_EQ(model.config().output_size(), 1);
  EXPECT_EQ(model.config().output(0).name(), "OUTPUT");

  EXPECT_FLOAT_EQ(Output(Step(1, 7, /*start=*/true)), 101);
  EXPECT_FLOAT_EQ(Output(Step(1, 8, true)), 101);  // another sequence, its own state
  EXPECT_FLOAT_EQ(Output(Step(2, 7)), 103);
  EXPECT_FLOAT_EQ(Output(Step(3, 7, false, /*end=*/true)), 106);
  EXPECT_FLOAT_EQ(Output(Step(5, 8)), 106);

  // Sequence 7 has ended; a request may not send the state itself.
  auto ended = Step(1, 7);
  ASSERT_FALSE(ended.ok());
  EXPECT_EQ(ended.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ended.status().message().find("sequence 7"), std::string::npos) << ended.status().message();
  auto state_sent = Step(1, 8, false, false, {Fp32("STATE_IN", {1, 1}, {0})});
  ASSERT_FALSE(state_sent.ok());
  EXPECT_EQ(state_sent.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(state_sent.status().message().find("implicit state"), std::string::npos) << state_sent.status().message();
  EXPECT_FLOAT_EQ(Output(Step(1, 8)), 107);  // sequence 8 carries on
}

TEST_F(SequenceModelTest, ASequenceModelWithoutBatchingOrControlsRunsDirect) {
  Model& model = LoadReady(
      "name: \"acc\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: 0\n"
      "sequence_batching { state [ { input_name: \"STATE_IN\" output_name: \"STATE_OUT\" data_type: TYPE_FP32 "
      "dims: [ 1, 1 ] } ] }\n"
      "input [ { name: \"INPUT\" data_type: TYPE_FP32 dims: [ 1, 1 ] } ]\n"
      "output [ { name: \"OUTPUT\" data_type: TYPE_FP32 dims: [ 1, 1 ] } ]\n");
  (void)model;
  EXPECT_FLOAT_EQ(Output(Step(4, 1, true)), 4);
  EXPECT_FLOAT_EQ(Output(Step(4, 1)), 8);
  auto none = Step(4, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("correlation ID"), std::string::npos) << none.status().message();
}

struct BadConfig {
  const char* what;
  std::string config;
  const char* reason;  // a part of the UNAVAILABLE reason
};

class SequenceConfigRefused : public SequenceModelTest, public ::testing::WithParamInterface<BadConfig> {};

TEST_P(SequenceConfigRefused, AtLoadNamingTheField) {
  const BadConfig& bad = GetParam();
  const std::string reason = LoadFails(bad.config);
  EXPECT_NE(reason.find(bad.reason), std::string::npos) << bad.what << ": " << reason;
}

const std::string kControl =
    "control_input [ { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]";

INSTANTIATE_TEST_SUITE_P(
    Repository, SequenceConfigRefused,
    ::testing::Values(
        BadConfig{"a control input the model lacks", AccumulatorConfig("direct { } " + kControl),
                  "control input (CONTROL_SEQUENCE_START) 'START' is not an input of the model"},
        BadConfig{"a state input the model lacks",
                  "name: \"acc\"\nmax_batch_size: 4\nsequence_batching { state [ { input_name: \"NOPE\" "
                  "output_name: \"STATE_OUT\" data_type: TYPE_FP32 dims: [ 1 ] } ] }\n",
                  "'NOPE' is not an input of the model"},
        BadConfig{"a state output the model lacks",
                  "name: \"acc\"\nmax_batch_size: 4\nsequence_batching { state [ { input_name: \"STATE_IN\" "
                  "output_name: \"NOPE\" data_type: TYPE_FP32 dims: [ 1 ] } ] }\n",
                  "output_name 'NOPE' is not an output of the model"},
        BadConfig{"state dims the model does not have",
                  "name: \"acc\"\nmax_batch_size: 4\nsequence_batching { state [ { input_name: \"STATE_IN\" "
                  "output_name: \"STATE_OUT\" data_type: TYPE_FP32 dims: [ 3 ] } ] }\n",
                  "the server feeds [-1,3]"},
        BadConfig{"iterative_sequence", AccumulatorConfig("iterative_sequence: true"), "iterative_sequence"},
        BadConfig{"a fallback model",
                  AccumulatorConfig("direct { }", "",
                                    "parameters { key: \"fallback_model\" value { string_value: \"x\" } }\n"),
                  "fallback_model"},
        BadConfig{"version weights",
                  AccumulatorConfig("direct { }", "",
                                    "parameters { key: \"version_weights\" value { string_value: \"1:100\" } }\n"),
                  "version_weights"},
        BadConfig{"a preferred batch size above max_batch_size",
                  AccumulatorConfig("oldest { max_candidate_sequences: 4 preferred_batch_size: [ 9 ] }"),
                  "preferred batch size must be <= max batch size"},
        BadConfig{"two value lists for one control",
                  AccumulatorConfig("direct { } control_input [ { name: \"START\" control [ { kind: "
                                    "CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ] } ] "
                                    "} ]"),
                  "more than one of"},
        BadConfig{"a bad batch_window on direct",
                  AccumulatorConfig("direct { }", "",
                                    "parameters { key: \"batch_window\" value { string_value: \"sometimes\" } }\n"),
                  "batch_window"},
        BadConfig{"an initial_state file that is missing",
                  AccumulatorConfig("direct { }",
                                    "initial_state: { data_type: TYPE_FP32 dims: [ 1 ] name: \"i\" data_file: "
                                    "\"absent\" }"),
                  "initial_state of state 'STATE_IN'"}),
    [](const ::testing::TestParamInfo<BadConfig>& info) {
      std::string name = info.param.what;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

}  // namespace
}  // namespace ortserve

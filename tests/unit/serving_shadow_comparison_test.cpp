// Shadow comparison (serving/ShadowComparison.h, config/ShadowConfig.h): the
// parameters and their refusals, the sampler's exact share, the bound on
// shadow runs in flight and the drops it counts, the real answer sent before
// the shadow run starts, and the per-output comparison.
#include "serving/ShadowComparison.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ParsedConfig.h"
#include "TestTensors.h"

namespace ortserve {
namespace {

using ::testing::HasSubstr;
using testing_util::Fp32;

Result<std::optional<ShadowConfig>> Shadow(const std::string& params) {
  return ShadowConfig::FromConfig(Parse("name: \"m\" " + params));
}

std::string P(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } } ";
}

TEST(ShadowConfig, ParsesAndDefaultsTheTolerance) {
  auto none = Shadow("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value());
  auto c = Shadow(P("shadow_version", "2") + P("shadow_fraction", "0.25"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->version, 2);
  EXPECT_DOUBLE_EQ((*c)->fraction, 0.25);
  EXPECT_DOUBLE_EQ((*c)->tolerance, 0.0);
  auto t = Shadow(P("shadow_version", "3") + P("shadow_fraction", "1") + P("shadow_tolerance", "0.01"));
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ((*t)->tolerance, 0.01);
}

TEST(ShadowConfig, EveryBadValueNamesItsParameter) {
  const std::string ok_version = P("shadow_version", "2");
  const std::string ok_fraction = P("shadow_fraction", "0.5");
  const std::pair<std::string, std::string> bad[] = {
      {P("shadow_version", "x") + ok_fraction, "'shadow_version' value 'x'"},
      {P("shadow_version", "0") + ok_fraction, "'shadow_version' value '0'"},
      {P("shadow_version", "1.5") + ok_fraction, "'shadow_version' value '1.5'"},
      {ok_version + P("shadow_fraction", "0"), "'shadow_fraction' value '0'"},
      {ok_version + P("shadow_fraction", "1.01"), "'shadow_fraction' value '1.01'"},
      {ok_version + P("shadow_fraction", "half"), "'shadow_fraction' value 'half'"},
      {ok_version + ok_fraction + P("shadow_tolerance", "-0.1"), "'shadow_tolerance' value '-0.1'"},
      {ok_version + ok_fraction + P("shadow_tolerance", "inf"), "'shadow_tolerance' value 'inf'"},
      {ok_fraction, "need parameter 'shadow_version'"},
      {P("shadow_tolerance", "0.1"), "need parameter 'shadow_version'"},
      {ok_version, "needs parameter 'shadow_fraction'"},
  };
  for (const auto& [params, expected] : bad) {
    auto c = Shadow(params);
    ASSERT_FALSE(c.ok()) << params;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr(expected)) << params;
  }
}

// A shadow version that holds what it is handed (up to `accept`), answered by the test.
struct HeldShadow {
  size_t accept = 100;
  std::vector<std::unique_ptr<InferenceRequest>> held;
  std::vector<std::string>* order = nullptr;
  ShadowComparison::Submit Submit() {
    return [this](std::unique_ptr<InferenceRequest>& r) {
      if (held.size() >= accept) return false;
      if (order) order->push_back("shadow " + r->id);
      held.push_back(std::move(r));
      return true;
    };
  }
  void Answer(size_t i, std::vector<Tensor> outputs) {
    InferenceResponse response;
    response.outputs = std::move(outputs);
    auto r = std::move(held[i]);
    r->on_complete(std::move(response));
  }
};

ShadowConfig Config(double fraction, double tolerance) {
  ShadowConfig c;
  c.version = 2;
  c.fraction = fraction;
  c.tolerance = tolerance;
  return c;
}

InferenceResponse Served(std::vector<Tensor> outputs, const std::string& model = "m", const std::string& version = "1") {
  InferenceResponse r;
  r.model_name = model;
  r.model_version = version;
  r.outputs = std::move(outputs);
  return r;
}

// Serves one request through `shadow` as ServedModel does: sampled, attached, answered with `answer`.
void ServeOne(ShadowComparison& shadow, const std::string& id, Result<InferenceResponse> answer,
              std::vector<std::string>* order = nullptr) {
  InferenceRequest request;
  request.model_name = "m";
  request.id = id;
  request.inputs.push_back(Fp32("x", {1, 2}, {1, 2}));
  request.on_complete = [order, id](Result<InferenceResponse>) {
    if (order) order->push_back("client " + id);
  };
  auto copy = shadow.Sample(request);
  if (copy) shadow.Attach(request, std::move(copy));
  request.on_complete(std::move(answer));
}

TEST(ShadowComparison, RealAnswerFirstThenTheShadowRunOnTheShadowVersion) {
  std::vector<std::string> order;
  HeldShadow target;
  target.order = &order;
  auto shadow = std::make_shared<ShadowComparison>("m", "1", Config(1.0, 0.0), std::vector<std::string>{"y"}, 4,
                                                   target.Submit());
  ServeOne(*shadow, "a", Served({Fp32("y", {1, 2}, {1, 2})}), &order);
  EXPECT_EQ(order, (std::vector<std::string>{"client a", "shadow a"}));
  ASSERT_EQ(target.held.size(), 1u);
  EXPECT_EQ(target.held[0]->model_version, "2");
  EXPECT_EQ(target.held[0]->inputs.size(), 1u);
  target.Answer(0, {Fp32("y", {1, 2}, {1, 2})});
  const ShadowSummary s = shadow->Snapshot();
  EXPECT_EQ(s.compared, 1u);
  EXPECT_EQ(s.dropped, 0u);
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_EQ(s.outputs[0].mismatches, 0u);
  EXPECT_EQ(s.outputs[0].abs_difference.count, 1u);
}

TEST(ShadowComparison, SamplesTheFraction) {
  HeldShadow target;
  auto shadow = std::make_shared<ShadowComparison>("m", "1", Config(0.1, 0.0), std::vector<std::string>{"y"}, 1000,
                                                   target.Submit());
  for (int i = 0; i < 200; ++i) ServeOne(*shadow, std::to_string(i), Served({Fp32("y", {1}, {1})}));
  EXPECT_EQ(target.held.size(), 20u);
}

TEST(ShadowComparison, DropsWhenTooManyRunsAreInFlightOrTheShadowRefuses) {
  HeldShadow target;
  auto shadow = std::make_shared<ShadowComparison>("m", "1", Config(1.0, 0.0), std::vector<std::string>{"y"}, 2,
                                                   target.Submit());
  for (int i = 0; i < 5; ++i) ServeOne(*shadow, std::to_string(i), Served({Fp32("y", {1}, {1})}));
  EXPECT_EQ(target.held.size(), 2u);
  EXPECT_EQ(shadow->Snapshot().dropped, 3u);
  target.Answer(0, {Fp32("y", {1}, {1})});  // one run finishes: room for one more
  ServeOne(*shadow, "5", Served({Fp32("y", {1}, {1})}));
  EXPECT_EQ(target.held.size(), 3u);
  EXPECT_EQ(shadow->Snapshot().dropped, 3u);
  // The shadow version not READY or its queue full: dropped too.
  HeldShadow full;
  full.accept = 0;
  auto refused = std::make_shared<ShadowComparison>("m", "1", Config(1.0, 0.0), std::vector<std::string>{"y"}, 2,
                                                    full.Submit());
  for (int i = 0; i < 3; ++i) ServeOne(*refused, std::to_string(i), Served({Fp32("y", {1}, {1})}));
  const ShadowSummary s = refused->Snapshot();
  EXPECT_EQ(s.dropped, 3u);
  EXPECT_EQ(s.compared, 0u);
  // Nothing left in flight: a later run starts.
  full.accept = 1;
  ServeOne(*refused, "3", Served({Fp32("y", {1}, {1})}));
  EXPECT_EQ(full.held.size(), 1u);
}

TEST(ShadowComparison, OnlyThisVersionsSuccessfulAnswersAreShadowed) {
  HeldShadow target;
  auto shadow = std::make_shared<ShadowComparison>("m", "1", Config(1.0, 0.0), std::vector<std::string>{"y"}, 4,
                                                   target.Submit());
  ServeOne(*shadow, "error", Result<InferenceResponse>(Unavailable("queue full")));
  ServeOne(*shadow, "fallback", Served({Fp32("y", {1}, {1})}, "other_model", "1"));
  EXPECT_TRUE(target.held.empty());
  const ShadowSummary s = shadow->Snapshot();
  EXPECT_EQ(s.compared + s.dropped + s.failed, 0u);
}

TEST(ShadowComparison, ComparesEachOutputAgainstTheTolerance) {
  auto shadow = std::make_shared<ShadowComparison>("m", "1", Config(1.0, 0.01), std::vector<std::string>{"y", "z"},
                                                   1, nullptr);
  // y: within 0.01 absolute (|served| < 1); z: 0.5 off at 100 -> relative 0.005, within.
  shadow->Compare({Fp32("y", {1, 1}, {0.5f}), Fp32("z", {1, 1}, {100.f})},
                  {Fp32("y", {1, 1}, {0.505f}), Fp32("z", {1, 1}, {100.5f})});
  // y: 0.15 off -> mismatch; z: 2 off at 100 -> relative 0.02 -> mismatch.
  shadow->Compare({Fp32("y", {1, 1}, {0.5f}), Fp32("z", {1, 1}, {100.f})},
                  {Fp32("y", {1, 1}, {0.65f}), Fp32("z", {1, 1}, {102.f})});
  const ShadowSummary s = shadow->Snapshot();
  EXPECT_EQ(s.compared, 2u);
  ASSERT_EQ(s.outputs.size(), 2u);
  EXPECT_EQ(s.outputs[0].name, "y");
  EXPECT_EQ(s.outputs[0].mismatches, 1u);
  EXPECT_NEAR(s.outputs[0].max_abs_difference, 0.15, 1e-6);
  EXPECT_EQ(s.outputs[1].mismatches, 1u);
  EXPECT_NEAR(s.outputs[1].max_abs_difference, 2.0, 1e-6);
  EXPECT_NEAR(s.outputs[1].max_rel_difference, 0.02, 1e-6);
  EXPECT_FALSE(s.outputs[0].has_classes);  // last dim 1: no class dimension
  // The histogram: one observation per comparison, 0.005 and 0.15 -> buckets 1e-2 and 1.
  const Histogram::Snapshot& h = s.outputs[0].abs_difference;
  EXPECT_EQ(h.count, 2u);
  ASSERT_GE(h.upper_bounds.size(), 10u);
  EXPECT_EQ(h.upper_bounds[7], 10'000'000u);  // 0.01
  EXPECT_EQ(h.cumulative[7], 1u);
  EXPECT_EQ(h.cumulative[8], 1u);  // 0.1
  EXPECT_EQ(h.cumulative[9], 2u);  // 1
}

TEST(ShadowComparison, TopOneDisagreementIsAMismatchWhateverTheTolerance) {
  auto shadow = std::make_shared<ShadowComparison>("m", "1", Config(1.0, 10.0), std::vector<std::string>{"logits"},
                                                   1, nullptr);
  // Two rows of three classes: the second row's top class moves from 2 to 0.
  shadow->Compare({Fp32("logits", {2, 3}, {0, 1, 2, 0.4f, 0, 0.5f})}, {Fp32("logits", {2, 3}, {0, 1, 2, 0.6f, 0, 0.5f})});
  shadow->Compare({Fp32("logits", {2, 3}, {0, 1, 2, 0, 0, 1})}, {Fp32("logits", {2, 3}, {0, 1, 2, 0, 0, 1})});
  const ShadowSummary s = shadow->Snapshot();
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_TRUE(s.outputs[0].has_classes);
  EXPECT_EQ(s.outputs[0].top1_rows, 4u);
  EXPECT_EQ(s.outputs[0].top1_agreeing, 3u);
  EXPECT_EQ(s.outputs[0].mismatches, 1u);
}

TEST(ShadowComparison, MissingOutputsAndFailedRunsAreCounted) {
  HeldShadow target;
  auto shadow = std::make_shared<ShadowComparison>("m", "1", Config(1.0, 0.0), std::vector<std::string>{"y"}, 4,
                                                   target.Submit());
  shadow->Compare({Fp32("y", {1}, {1})}, {Fp32("other", {1}, {1})});
  shadow->Compare({Fp32("y", {2}, {1, 2})}, {Fp32("y", {1}, {1})});
  ServeOne(*shadow, "a", Served({Fp32("y", {1}, {1})}));
  ASSERT_EQ(target.held.size(), 1u);
  auto r = std::move(target.held[0]);
  r->on_complete(Unavailable("model 'm' version '2' is not ready"));
  const ShadowSummary s = shadow->Snapshot();
  EXPECT_EQ(s.compared, 2u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_THAT(s.last_failure, HasSubstr("not ready"));
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_EQ(s.outputs[0].mismatches, 2u);
  EXPECT_THAT(s.outputs[0].last_mismatch, HasSubstr("reference"));  // the shape difference
}

}  // namespace
}  // namespace ortserve

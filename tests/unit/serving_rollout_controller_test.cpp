// The progressive canary: its parameters (config/RolloutConfig.h) and its
// decisions on a fake clock (serving/RolloutController.h): step advance, the
// minimum requests, each breach kind, rollback, promotion, and a restart.
#include "serving/RolloutController.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ParsedConfig.h"
#include "config/RolloutConfig.h"

namespace ortserve {
namespace {

using ::testing::HasSubstr;
using Clock = RolloutController::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Cumulative counters a version's statistics would hold.
class FakeVersion {
 public:
  void Serve(uint64_t n, milliseconds each) {
    for (uint64_t i = 0; i < n; ++i) durations_.Observe(static_cast<uint64_t>(each.count()) * 1'000'000);
    successes_ += n;
  }
  void Fail(uint64_t n) { errors_ += n; }
  VersionCounters Counters() const { return {successes_, errors_, durations_.Read()}; }

 private:
  Histogram durations_ = Histogram::Durations();
  uint64_t successes_ = 0;
  uint64_t errors_ = 0;
};

Result<std::optional<RolloutConfig>> ParseRollout(const std::string& parameters) {
  return RolloutConfig::FromConfig(Parse("name: \"m\" " + parameters));
}

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } } ";
}

RolloutConfig Config(const std::string& extra = Param("rollout_max_error_rate", "0.05") +
                                                Param("rollout_max_p95_ms", "100")) {
  auto c = ParseRollout(Param("rollout_steps", "10,50,100") + Param("rollout_step_seconds", "60") +
                        Param("rollout_min_requests", "20") + extra);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return **c;
}

class RolloutControllerTest : public ::testing::Test {
 protected:
  RolloutController Start(RolloutConfig config) {
    return RolloutController(std::move(config), t0_, candidate_.Counters(), stable_.Counters());
  }
  std::optional<RolloutTransition> At(RolloutController& c, Clock::duration since_start) {
    return c.Update(t0_ + since_start, candidate_.Counters(), stable_.Counters());
  }
  const Clock::time_point t0_ = Clock::time_point() + seconds(1000);
  FakeVersion candidate_;
  FakeVersion stable_;
};

TEST(RolloutConfigTest, ParsesEveryParameter) {
  auto c = ParseRollout(Param("rollout_steps", "5, 20,50,100") + Param("rollout_step_seconds", "300,600,600") +
                        Param("rollout_min_requests", "200") + Param("rollout_max_p95_ms", "900") +
                        Param("rollout_max_error_rate", "0.03") + Param("rollout_max_p95_ratio", "1.5"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->steps, (std::vector<int>{5, 20, 50}));
  EXPECT_EQ((*c)->step_seconds, (std::vector<double>{300, 600, 600}));
  EXPECT_EQ((*c)->min_requests, 200u);
  EXPECT_EQ((*c)->max_p95_ms, 900);
  EXPECT_EQ((*c)->max_error_rate, 0.03);
  EXPECT_EQ((*c)->max_p95_ratio, 1.5);
}

TEST(RolloutConfigTest, AbsentWithoutRolloutParameters) {
  auto c = ParseRollout(Param("version_weights", "1:1"));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
}

TEST(RolloutConfigTest, OneStepSecondsValueAppliesToEveryStep) {
  auto c = ParseRollout(Param("rollout_steps", "5,20") + Param("rollout_step_seconds", "1.5") +
                        Param("rollout_max_error_rate", "0"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->steps, (std::vector<int>{5, 20}));  // 100 implied
  EXPECT_EQ((*c)->step_seconds, (std::vector<double>{1.5, 1.5}));
  EXPECT_EQ((*c)->min_requests, 1u);
}

TEST(RolloutConfigTest, EveryBadParameterIsNamed) {
  const std::string steps = Param("rollout_steps", "5,50,100");
  const std::string secs = Param("rollout_step_seconds", "10");
  const std::string limit = Param("rollout_max_error_rate", "0.1");
  const std::pair<std::string, std::string> cases[] = {
      {secs + limit, "rollout_steps"},
      {Param("rollout_steps", "5,x") + secs + limit, "rollout_steps"},
      {Param("rollout_steps", "20,5") + secs + limit, "rollout_steps"},
      {Param("rollout_steps", "0,50") + secs + limit, "rollout_steps"},
      {Param("rollout_steps", "100") + secs + limit, "rollout_steps"},
      {steps + limit, "rollout_step_seconds"},
      {steps + Param("rollout_step_seconds", "10,20,30") + limit, "rollout_step_seconds"},
      {steps + Param("rollout_step_seconds", "-1") + limit, "rollout_step_seconds"},
      {steps + secs + limit + Param("rollout_min_requests", "0"), "rollout_min_requests"},
      {steps + secs + limit + Param("rollout_min_requests", "many"), "rollout_min_requests"},
      {steps + secs + Param("rollout_max_p95_ms", "0"), "rollout_max_p95_ms"},
      {steps + secs + Param("rollout_max_error_rate", "1.5"), "rollout_max_error_rate"},
      {steps + secs + Param("rollout_max_p95_ratio", "nan"), "rollout_max_p95_ratio"},
      {steps + secs, "threshold"},
  };
  for (const auto& [params, named] : cases) {
    auto c = ParseRollout(params);
    ASSERT_FALSE(c.ok()) << params;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr(named)) << params;
  }
}

TEST_F(RolloutControllerTest, AdvancesThroughEveryStepThenPromotes) {
  RolloutController c = Start(Config());
  EXPECT_EQ(c.weight(), 10);
  EXPECT_EQ(c.state(), RolloutState::kProgressing);
  candidate_.Serve(30, milliseconds(20));
  stable_.Serve(270, milliseconds(20));
  EXPECT_FALSE(At(c, seconds(59)));  // the step's time is not up
  auto t = At(c, seconds(60));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kAdvanced);
  EXPECT_EQ(c.weight(), 50);
  EXPECT_EQ(c.step(), 1u);
  ASSERT_EQ(c.finished_steps().size(), 1u);
  EXPECT_EQ(c.finished_steps()[0].candidate.requests, 30u);
  EXPECT_EQ(c.finished_steps()[0].stable.requests, 270u);
  EXPECT_EQ(c.finished_steps()[0].outcome, "passed");
  // The next step's window starts empty: the 30 requests of step 1 do not count.
  t = At(c, seconds(120));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kPaused);
  EXPECT_EQ(c.state(), RolloutState::kPaused);
  candidate_.Serve(20, milliseconds(20));
  t = At(c, seconds(121));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kPromoted);
  EXPECT_EQ(c.weight(), 100);
  EXPECT_EQ(c.state(), RolloutState::kPromoted);
  candidate_.Fail(1000);  // final: nothing changes after promotion
  EXPECT_FALSE(At(c, seconds(500)));
  EXPECT_EQ(c.weight(), 100);
}

TEST_F(RolloutControllerTest, PausesUntilTheStepHasMinRequests) {
  RolloutController c = Start(Config());
  candidate_.Serve(19, milliseconds(5));
  auto t = At(c, seconds(60));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kPaused);
  EXPECT_EQ(c.state(), RolloutState::kPaused);
  EXPECT_EQ(c.weight(), 10);
  EXPECT_THAT(c.reason(), HasSubstr("19 of the 20"));
  EXPECT_FALSE(At(c, seconds(90)));  // paused once, not again
  candidate_.Serve(1, milliseconds(5));
  t = At(c, seconds(91));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kAdvanced);
  EXPECT_EQ(c.state(), RolloutState::kProgressing);
}

TEST_F(RolloutControllerTest, ErrorRateBreachRollsBackAtOnce) {
  RolloutController c = Start(Config());
  candidate_.Serve(18, milliseconds(5));
  candidate_.Fail(1);
  EXPECT_FALSE(At(c, seconds(1)));  // 19 requests: below min_requests, no verdict yet
  candidate_.Fail(1);               // 2 of 20 = 0.1 > 0.05
  auto t = At(c, seconds(2));       // long before the step's end
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kRolledBack);
  EXPECT_EQ(c.weight(), 0);
  EXPECT_EQ(c.state(), RolloutState::kRolledBack);
  EXPECT_THAT(c.reason(), HasSubstr("error rate 0.1 (2 of 20 requests) over rollout_max_error_rate 0.05"));
  EXPECT_EQ(c.finished_steps().back().outcome, "rolled_back");
  candidate_.Serve(10000, milliseconds(1));  // final: stays rolled back
  EXPECT_FALSE(At(c, seconds(600)));
  EXPECT_EQ(c.state(), RolloutState::kRolledBack);
  EXPECT_EQ(c.weight(), 0);
}

TEST_F(RolloutControllerTest, P95BreachNamesValueAndThreshold) {
  RolloutController c = Start(Config());
  candidate_.Serve(18, milliseconds(20));
  candidate_.Serve(2, milliseconds(400));  // 10% slow: the p95 lies in the 250..500 ms bucket
  auto t = At(c, seconds(5));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kRolledBack);
  EXPECT_THAT(c.reason(), HasSubstr("p95 "));
  EXPECT_THAT(c.reason(), HasSubstr("ms over rollout_max_p95_ms 100 in step 1 (10%)"));
  ASSERT_TRUE(c.finished_steps().back().candidate.p95_ms);
  EXPECT_GT(*c.finished_steps().back().candidate.p95_ms, 250);
  EXPECT_LE(*c.finished_steps().back().candidate.p95_ms, 500);
}

TEST_F(RolloutControllerTest, P95RatioBreachComparesWithStable) {
  RolloutController c = Start(Config(Param("rollout_max_p95_ratio", "2")));
  stable_.Serve(100, milliseconds(3));      // p95 in the 2.5..5 ms bucket
  candidate_.Serve(20, milliseconds(40));   // p95 in the 25..50 ms bucket: ratio ~10
  auto t = At(c, seconds(5));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kRolledBack);
  EXPECT_THAT(c.reason(), HasSubstr("over rollout_max_p95_ratio 2"));
}

TEST_F(RolloutControllerTest, RatioNeedsStableFigures) {
  RolloutController c = Start(Config(Param("rollout_max_p95_ratio", "2")));
  candidate_.Serve(20, milliseconds(40));  // the stable version answered nothing this step
  auto t = At(c, seconds(60));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kAdvanced);
}

TEST_F(RolloutControllerTest, HealthyWindowDoesNotBreach) {
  RolloutController c = Start(Config());
  candidate_.Serve(1000, milliseconds(20));
  candidate_.Fail(40);  // 40 / 1040 < 0.05
  EXPECT_FALSE(At(c, seconds(30)));
  EXPECT_EQ(c.state(), RolloutState::kProgressing);
}

TEST_F(RolloutControllerTest, RestartBeginsAtStepZero) {
  // A server restart (or an operator's reload) builds a new controller: it
  // starts at the first, smallest weight with an empty window, whatever the
  // counters hold.
  RolloutController c = Start(Config());
  candidate_.Fail(50);
  ASSERT_TRUE(At(c, seconds(1)));
  ASSERT_EQ(c.state(), RolloutState::kRolledBack);
  RolloutController again(Config(), t0_ + seconds(2), candidate_.Counters(), stable_.Counters());
  EXPECT_EQ(again.state(), RolloutState::kProgressing);
  EXPECT_EQ(again.weight(), 10);
  EXPECT_EQ(again.step(), 0u);
  candidate_.Serve(20, milliseconds(5));
  auto t = again.Update(t0_ + seconds(62), candidate_.Counters(), stable_.Counters());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, RolloutEvent::kAdvanced);
}

TEST(RolloutWindowTest, P95InterpolatesWithinTheBucket) {
  FakeVersion v;
  const VersionCounters before = v.Counters();
  v.Serve(100, milliseconds(2));  // all in the 1..2.5 ms bucket
  const WindowFigures f = WindowBetween(before, v.Counters());
  EXPECT_EQ(f.requests, 100u);
  ASSERT_TRUE(f.p95_ms);
  EXPECT_NEAR(*f.p95_ms, 1.0 + 1.5 * 0.95, 1e-9);
  EXPECT_FALSE(WindowBetween(v.Counters(), v.Counters()).p95_ms);
}

}  // namespace
}  // namespace ortserve

// The progressive canary at run time (serving/VersionRollout.h): the split
// of unversioned requests, analysis on the versions' own statistics, a new
// pair or an operator's restart starting again at step 1, and the state the
// endpoint and metrics show. Driven with explicit time points.
#include "serving/VersionRollout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ParsedConfig.h"

namespace ortserve {
namespace {

using ::testing::HasSubstr;
using Clock = VersionRollout::Clock;
using std::chrono::seconds;

RolloutConfig Config() {
  auto c = RolloutConfig::FromConfig(Parse(R"(name: "m"
      parameters { key: "rollout_steps" value { string_value: "10,50" } }
      parameters { key: "rollout_step_seconds" value { string_value: "60" } }
      parameters { key: "rollout_min_requests" value { string_value: "10" } }
      parameters { key: "rollout_max_error_rate" value { string_value: "0.2" } })"));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return **c;
}

class VersionRolloutTest : public ::testing::Test {
 protected:
  RolloutPair Pair() { return {1, &stable_, &stable_, 2, candidate_, candidate_}; }
  // n unversioned requests at `t`; how many went to the candidate.
  int Route(VersionRollout& r, Clock::time_point t, int n) {
    int to_candidate = 0;
    for (int i = 0; i < n; ++i) to_candidate += r.RouteToCandidate(t, Pair()) ? 1 : 0;
    return to_candidate;
  }
  void Count(ModelStatistics* stats, RequestOutcome outcome, uint64_t n) {
    stats->outcomes[static_cast<size_t>(outcome)].fetch_add(n);
    if (outcome == RequestOutcome::kSuccess) {
      for (uint64_t i = 0; i < n; ++i) stats->request_duration.Observe(1'000'000);
    }
  }
  uint64_t Events(const RolloutStatus& s, RolloutEvent e) { return s.events[static_cast<size_t>(e)]; }

  const Clock::time_point t0_ = Clock::time_point() + seconds(1000);
  ModelStatistics stable_{1};
  ModelStatistics first_candidate_{1};
  ModelStatistics* candidate_ = &first_candidate_;
};

TEST_F(VersionRolloutTest, SplitsExactlyByTheStepWeight) {
  VersionRollout r("m", Config());
  EXPECT_EQ(Route(r, t0_, 100), 10);
  EXPECT_EQ(Route(r, t0_, 1000), 100);
  RolloutStatus s = r.Status(t0_, Pair());
  EXPECT_EQ(s.state, "progressing");
  EXPECT_EQ((std::pair{s.stable, s.candidate}), (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_EQ(s.weight, 10);
  EXPECT_EQ(Events(s, RolloutEvent::kStarted), 1u);
}

TEST_F(VersionRolloutTest, AdvancesOnTheVersionsStatisticsThenPromotes) {
  VersionRollout r("m", Config());
  Route(r, t0_, 1);
  Count(candidate_, RequestOutcome::kSuccess, 10);
  Count(&stable_, RequestOutcome::kSuccess, 90);
  Route(r, t0_ + seconds(61), 1);
  RolloutStatus s = r.Status(t0_ + seconds(61), Pair());
  EXPECT_EQ(s.weight, 50);
  ASSERT_EQ(s.finished_steps.size(), 1u);
  EXPECT_EQ(s.finished_steps[0].candidate.requests, 10u);
  EXPECT_EQ(s.finished_steps[0].stable.requests, 90u);
  Count(candidate_, RequestOutcome::kSuccess, 10);
  EXPECT_EQ(r.Status(t0_ + seconds(122), Pair()).state, "promoted");
  EXPECT_EQ(Route(r, t0_ + seconds(123), 50), 50);
}

TEST_F(VersionRolloutTest, RunFailuresAndTimeoutsRollBackAndStayRolledBack) {
  VersionRollout r("m", Config());
  Route(r, t0_, 1);
  Count(candidate_, RequestOutcome::kSuccess, 7);
  Count(candidate_, RequestOutcome::kInternal, 2);
  Count(candidate_, RequestOutcome::kTimeout, 1);
  Count(candidate_, RequestOutcome::kInvalidInput, 50);  // the client's errors: not the version's
  EXPECT_EQ(Route(r, t0_ + seconds(2), 100), 0);  // the first request ticks: rolled back before it is routed
  RolloutStatus s = r.Status(t0_ + seconds(2), Pair());
  EXPECT_EQ(s.state, "rolled_back");
  EXPECT_THAT(s.reason, HasSubstr("error rate 0.3 (3 of 10 requests)"));
  EXPECT_EQ(Route(r, t0_ + seconds(3), 100), 0);
  EXPECT_EQ(Events(s, RolloutEvent::kRolledBack), 1u);
}

TEST_F(VersionRolloutTest, ANewCandidateOrARestartStartsAgainAtStepOne) {
  VersionRollout r("m", Config());
  Route(r, t0_, 1);
  Count(candidate_, RequestOutcome::kInternal, 10);
  Route(r, t0_ + seconds(2), 1);
  ASSERT_EQ(r.Status(t0_ + seconds(2), Pair()).state, "rolled_back");

  ModelStatistics reloaded(1);  // the candidate's load replaced: a new pair
  candidate_ = &reloaded;
  EXPECT_EQ(Route(r, t0_ + seconds(3), 100), 10);
  RolloutStatus s = r.Status(t0_ + seconds(3), Pair());
  EXPECT_EQ(s.state, "progressing");
  EXPECT_TRUE(s.finished_steps.empty());
  EXPECT_EQ(Events(s, RolloutEvent::kStarted), 2u);

  Count(candidate_, RequestOutcome::kInternal, 10);
  Route(r, t0_ + seconds(5), 1);
  ASSERT_EQ(r.Status(t0_ + seconds(5), Pair()).state, "rolled_back");
  r.Restart(Config());  // an operator's load, same versions
  EXPECT_EQ(Route(r, t0_ + seconds(6), 100), 10);
  s = r.Status(t0_ + seconds(6), Pair());
  EXPECT_EQ(s.state, "progressing");
  EXPECT_EQ(Events(s, RolloutEvent::kStarted), 3u);
  EXPECT_EQ(Events(s, RolloutEvent::kRolledBack), 2u);
}

TEST_F(VersionRolloutTest, InactiveWithoutTwoVersions) {
  VersionRollout r("m", Config());
  RolloutStatus s = r.Status(t0_, std::nullopt);
  EXPECT_FALSE(s.active);
  EXPECT_EQ(s.state, "inactive");
  EXPECT_EQ(s.steps, (std::vector<int>{10, 50}));
}

}  // namespace
}  // namespace ortserve

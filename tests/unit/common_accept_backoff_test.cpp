// AcceptBackoff: the pause after a failed accept grows and resets, errors of
// one connection do not pause, and the log says a count at most once per
// interval. Driven with made-up times: nothing sleeps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>

#include "server/common/AcceptBackoff.h"

namespace ortserve::common {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr AcceptBackoff::Options kOptions{
    .first_pause = milliseconds(10), .max_pause = milliseconds(1000), .log_interval = seconds(10)};

TEST(AcceptBackoff, PauseDoublesUpToTheMaximumAndResetsOnSuccess) {
  AcceptBackoff backoff("http", kOptions);
  auto now = AcceptBackoff::Clock::time_point{};
  std::vector<int64_t> pauses;
  for (int i = 0; i < 9; ++i) {
    const auto step = backoff.Failed(EMFILE, "Too many open files", now);
    pauses.push_back(step.pause.count());
    now += step.pause;
  }
  EXPECT_EQ(pauses, (std::vector<int64_t>{10, 20, 40, 80, 160, 320, 640, 1000, 1000}));
  EXPECT_EQ(backoff.consecutive_failures(), 9u);
  backoff.Succeeded(now);
  EXPECT_EQ(backoff.consecutive_failures(), 0u);
  EXPECT_EQ(backoff.Failed(ENFILE, "Too many open files in system", now).pause, milliseconds(10));
}

TEST(AcceptBackoff, ResourceErrorsPauseAndErrorsOfOneConnectionDoNot) {
  for (int error : {EMFILE, ENFILE, ENOBUFS, ENOMEM, EBADF, -1}) {
    AcceptBackoff backoff("http", kOptions);
    EXPECT_EQ(backoff.Failed(error, "x", {}).pause, milliseconds(10)) << error;
  }
  for (int error : {ECONNABORTED, EPROTO, EPERM, EINTR, ENETUNREACH}) {
    AcceptBackoff backoff("http", kOptions);
    EXPECT_EQ(backoff.Failed(error, "x", {}).pause, milliseconds(0)) << error;
    EXPECT_TRUE(AcceptBackoff::IsPerConnectionError(error));
  }
}

TEST(AcceptBackoff, LogsOneLinePerIntervalWithTheCount) {
  AcceptBackoff backoff("metrics", kOptions);
  auto now = AcceptBackoff::Clock::time_point{} + seconds(100);
  auto first = backoff.Failed(EMFILE, "Too many open files", now);
  ASSERT_TRUE(first.log);
  EXPECT_THAT(*first.log, HasSubstr("metrics: accept failed 1 time(s): Too many open files; pausing accepts 10 ms"));
  // A hundred thousand failures within the interval (per-connection errors
  // retry at once, so they come fast): no line.
  for (int i = 0; i < 100000; ++i) {
    now += std::chrono::microseconds(10);
    EXPECT_FALSE(backoff.Failed(ECONNABORTED, "Software caused connection abort", now).log);
  }
  now = AcceptBackoff::Clock::time_point{} + seconds(110);
  auto next = backoff.Failed(EMFILE, "Too many open files", now);
  ASSERT_TRUE(next.log);
  EXPECT_THAT(*next.log, HasSubstr("accept failed 100001 time(s) since the last such line: Too many open files"));
}

TEST(AcceptBackoff, RecoveryReportsWhatWasNotLoggedOnceTheIntervalAllows) {
  AcceptBackoff backoff("http", kOptions);
  const auto start = AcceptBackoff::Clock::time_point{} + seconds(100);
  ASSERT_TRUE(backoff.Failed(EMFILE, "Too many open files", start).log);
  EXPECT_FALSE(backoff.Succeeded(start + seconds(1)));  // nothing unlogged
  EXPECT_FALSE(backoff.Failed(EMFILE, "Too many open files", start + seconds(2)).log);
  EXPECT_FALSE(backoff.Succeeded(start + seconds(3)));  // inside the interval: kept for later
  EXPECT_FALSE(backoff.Failed(EMFILE, "Too many open files", start + seconds(4)).log);
  auto line = backoff.Succeeded(start + seconds(11));
  ASSERT_TRUE(line);
  EXPECT_THAT(*line, HasSubstr("accept failed 2 time(s) since the last such line: Too many open files; accepting again"));
  EXPECT_FALSE(backoff.Succeeded(start + seconds(30)));  // a success after a success says nothing
}

}  // namespace
}  // namespace ortserve::common

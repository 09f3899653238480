// OnDemandLoads: one load per model for any number of waiters, every waiter
// answered exactly once (the load's status, its deadline, or the stop), a
// late waiter joining the running load rather than starting another; the
// back-off after a failed load, on a fake clock.
#include "repository/OnDemandLoads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace ortserve {
namespace {

// Records the loads started; the test ends each with Finish().
struct FakeLoader {
  std::mutex mu;
  std::map<std::string, std::vector<OnDemandLoads::Done>> running;
  std::atomic<int> started{0};

  OnDemandLoads::StartLoad Start() {
    return [this](const std::string& name, OnDemandLoads::Done done) {
      ++started;
      std::lock_guard lock(mu);
      running[name].push_back(std::move(done));
    };
  }
  void Finish(const std::string& name, const Status& status) {
    std::vector<OnDemandLoads::Done> done;
    {
      std::lock_guard lock(mu);
      done = std::move(running[name]);
      running.erase(name);
    }
    for (auto& d : done) d(status);
  }
};

struct Answers {
  std::mutex mu;
  std::vector<Status> got;
  OnDemandLoads::Done Record() {
    return [this](Status s) {
      std::lock_guard lock(mu);
      got.push_back(std::move(s));
    };
  }
  size_t size() {
    std::lock_guard lock(mu);
    return got.size();
  }
};

constexpr auto kLong = std::chrono::seconds(60);

TEST(OnDemandLoads, ConcurrentWaitersShareOneLoad) {
  FakeLoader loader;
  OnDemandLoads loads(kLong, loader.Start());
  Answers answers;
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&] { loads.Wait("m", Clock::time_point::max(), answers.Record()); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(loader.started.load(), 1);
  EXPECT_EQ(answers.size(), 0u);
  loader.Finish("m", Status::Ok());
  ASSERT_EQ(answers.size(), 32u);
  for (const Status& s : answers.got) EXPECT_TRUE(s.ok());
  EXPECT_EQ(loads.ColdStarts().count, 1u);
  // The next wait starts a new load (the caller checks readiness first).
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 2);
  loader.Finish("m", Status::Ok());
}

TEST(OnDemandLoads, AFailedLoadAnswersEveryWaiterWithItsError) {
  FakeLoader loader;
  OnDemandLoads loads(kLong, loader.Start());
  Answers answers;
  for (int i = 0; i < 3; ++i) loads.Wait("m", Clock::time_point::max(), answers.Record());
  loader.Finish("m", InvalidArgument("failed to load 'm': bad file"));
  ASSERT_EQ(answers.size(), 3u);
  for (const Status& s : answers.got) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "failed to load 'm': bad file");
  }
  EXPECT_EQ(loads.ColdStarts().count, 0u);
}

TEST(OnDemandLoads, AWaiterPastItsDeadlineIsAnsweredAndTheLoadGoesOn) {
  FakeLoader loader;
  OnDemandLoads loads(kLong, loader.Start());
  std::promise<Status> expired;
  loads.Wait("m", Clock::now() + std::chrono::milliseconds(20), [&](Status s) { expired.set_value(s); });
  const Status s = expired.get_future().get();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("still loading"), std::string::npos) << s.message();
  // A later waiter joins the load still running instead of starting one.
  Answers answers;
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 1);
  loader.Finish("m", Status::Ok());
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers.got[0].ok());
}

TEST(OnDemandLoads, TheMaximumWaitCapsADeadline) {
  FakeLoader loader;
  OnDemandLoads loads(std::chrono::milliseconds(20), loader.Start());
  std::promise<Status> expired;
  loads.Wait("m", Clock::time_point::max(), [&](Status s) { expired.set_value(s); });
  EXPECT_EQ(expired.get_future().get().code(), StatusCode::kUnavailable);
  loader.Finish("m", Status::Ok());
}

TEST(OnDemandLoads, StopAnswersWaitersAndRefusesNewOnes) {
  FakeLoader loader;
  OnDemandLoads loads(kLong, loader.Start());
  Answers answers;
  loads.Wait("a", Clock::time_point::max(), answers.Record());
  loads.Wait("b", Clock::time_point::max(), answers.Record());
  loads.Stop();
  ASSERT_EQ(answers.size(), 2u);
  for (const Status& s : answers.got) EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  loader.Finish("a", Status::Ok());  // the load's end after the stop answers nobody twice
  loads.Wait("a", Clock::time_point::max(), answers.Record());
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers.got[2].code(), StatusCode::kUnavailable);
  EXPECT_EQ(loader.started.load(), 2);
  loader.Finish("b", Status::Ok());
}

// A clock the test moves, and model files it changes.
struct FakeClockAndFiles {
  std::atomic<Clock::time_point> now{Clock::time_point{} + std::chrono::hours(1)};
  std::mutex mu;
  std::string stamp = "v1";
  void Advance(std::chrono::milliseconds by) { now = now.load() + by; }
  OnDemandLoads::Now Now() {
    return [this] { return now.load(); };
  }
  OnDemandLoads::Stamp Stamp() {
    return [this](const std::string&) {
      std::lock_guard lock(mu);
      return stamp;
    };
  }
};

TEST(OnDemandLoads, AFailedLoadIsNotRetriedDuringAGrowingBackoff) {
  FakeLoader loader;
  FakeClockAndFiles env;
  OnDemandLoads loads(kLong, loader.Start(), env.Stamp(), env.Now());
  Answers answers;
  auto fail_once = [&] {
    loads.Wait("m", Clock::time_point::max(), answers.Record());
    loader.Finish("m", InvalidArgument("failed to load 'm': bad file"));
  };
  fail_once();
  ASSERT_EQ(loader.started.load(), 1);
  // During the back-off: the load's error at once, no load started.
  env.Advance(OnDemandLoads::kFirstBackoff - std::chrono::milliseconds(1));
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 1);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers.got[1].code(), StatusCode::kInvalidArgument);
  EXPECT_NE(answers.got[1].message().find("failed to load 'm': bad file"), std::string::npos);
  EXPECT_NE(answers.got[1].message().find("not retried for 2 s"), std::string::npos) << answers.got[1].message();
  // Past it: one more load, which fails again: twice as long now.
  env.Advance(std::chrono::milliseconds(1));
  fail_once();
  EXPECT_EQ(loader.started.load(), 2);
  env.Advance(2 * OnDemandLoads::kFirstBackoff - std::chrono::milliseconds(1));
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 2);
  EXPECT_NE(answers.got.back().message().find("not retried for 4 s"), std::string::npos);
  // Doubling stops at the cap.
  for (int i = 0; i < 10; ++i) {
    env.Advance(OnDemandLoads::kMaxBackoff);
    fail_once();
  }
  EXPECT_EQ(loader.started.load(), 12);
  env.Advance(OnDemandLoads::kMaxBackoff - std::chrono::milliseconds(1));
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 12);
  EXPECT_NE(answers.got.back().message().find("not retried for 60 s"), std::string::npos);
  // Other models are not held back.
  loads.Wait("other", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 13);
  loader.Finish("other", Status::Ok());
}

TEST(OnDemandLoads, ChangedFilesForgetAndSuccessEndTheBackoff) {
  FakeLoader loader;
  FakeClockAndFiles env;
  OnDemandLoads loads(kLong, loader.Start(), env.Stamp(), env.Now());
  Answers answers;
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  loader.Finish("m", InvalidArgument("bad file"));
  {
    std::lock_guard lock(env.mu);
    env.stamp = "v2";
  }
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 2);
  loader.Finish("m", InvalidArgument("bad file"));
  loads.Forget("m");  // an explicit load
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 3);
  loader.Finish("m", Status::Ok());
  // After a success, a failure backs off from the first step again, and a
  // kUnavailable failure (a full memory budget) not at all.
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  loader.Finish("m", InvalidArgument("bad file"));
  loads.Wait("m", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 4);
  EXPECT_NE(answers.got.back().message().find("not retried for 2 s"), std::string::npos);
  loads.Wait("n", Clock::time_point::max(), answers.Record());
  loader.Finish("n", Unavailable("model memory budget 1 MiB exhausted"));
  loads.Wait("n", Clock::time_point::max(), answers.Record());
  EXPECT_EQ(loader.started.load(), 6);
  loader.Finish("n", Status::Ok());
}

}  // namespace
}  // namespace ortserve

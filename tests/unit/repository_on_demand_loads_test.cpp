// OnDemandLoads: one load per model for any number of waiters, every waiter
// answered exactly once (the load's status, its deadline, or the stop), a
// late waiter joining the running load rather than starting another.
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

}  // namespace
}  // namespace ortserve

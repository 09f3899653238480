// The dynamic batcher's run watchdog (deadlines and cancellation reaching
// into a running batch) and its load estimate, driven by a fake clock and
// fake instances whose Run blocks until it is terminated or let through.
// Nothing here sleeps or asserts on timing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "fakes/FakeInstance.h"
#include "fakes/FakeSchedulerClock.h"
#include "fakes/RecordedCompletions.h"
#include "scheduler/DynamicBatcher.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

using namespace std::chrono_literals;


using testing_util::Floats;
using testing_util::Fp32;

class RunWatchdogTest : public ::testing::Test {
 protected:
  // Every Run blocks until it is terminated or let through (Release).
  void SetUp() override { gate_->Hold(); }

  void Start(int instances = 1, int max_batch_size = 8) {
    DynamicBatcherOptions o;
    o.model_name = "fake";
    o.model_version = "1";
    o.batching.max_batch_size = max_batch_size;
    o.batching.dynamic_batching = max_batch_size > 0;
    stats_ = std::make_unique<ModelStatistics>(max_batch_size);
    auto list = MakeFakeInstances(gate_, static_cast<size_t>(instances), {"OUTPUT0"});
    auto created = DynamicBatcher::Create(std::move(o), std::move(list), stats_.get(), &completer_, clock_);
    ASSERT_TRUE(created.ok()) << created.status().message();
    scheduler_ = std::move(created).value();
  }

  std::unique_ptr<InferenceRequest> Request(const std::string& id, float value, uint64_t timeout_us = 0,
                                            CancelFlag cancelled = nullptr) {
    auto r = std::make_unique<InferenceRequest>();
    r->model_name = "fake";
    r->id = id;
    r->inputs.push_back(Fp32("INPUT0", {1, 2}, {value, value}));
    r->timeout_us = timeout_us;
    r->cancelled = std::move(cancelled);
    r->arrival_time = clock_->Now();
    r->on_complete = done_.For(id);
    return r;
  }

  uint64_t Outcome(RequestOutcome o) const { return stats_->outcomes[static_cast<size_t>(o)].load(); }

  // Advances the clock and waits until the watchdog (the only thread waiting
  // on the clock while the single instance runs) has looked at the new time.
  void AdvanceAndSettle(Clock::duration by) {
    const uint64_t before = clock_->WaitsStarted();
    clock_->Advance(by);
    for (int i = 0; i < 30000 && clock_->WaitsStarted() == before; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_GT(clock_->WaitsStarted(), before) << "the watchdog never re-checked";
  }

  void ExpectSuccess(const std::string& id, float value) {
    auto result = done_.Get(id);
    ASSERT_TRUE(result.ok()) << id << ": " << result.status().message();
    EXPECT_EQ(Floats(result.value().outputs.at(0)), (std::vector<float>{value + 1, value + 1})) << id;
  }

  std::shared_ptr<FakeSchedulerClock> clock_ = std::make_shared<FakeSchedulerClock>();
  std::shared_ptr<FakeInstanceControl> gate_ = std::make_shared<FakeInstanceControl>();
  RecordedCompletions done_;
  CallbackCompleter completer_;
  std::unique_ptr<ModelStatistics> stats_;
  std::unique_ptr<Scheduler> scheduler_;  // last: shut down first
};

TEST_F(RunWatchdogTest, ExpiredBatchIsTerminatedAnsweredTimeoutAndTheInstanceServesOn) {
  Start();
  scheduler_->Submit(Request("late", 1, /*timeout_us=*/1000));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  clock_->Advance(2ms);  // past its deadline, mid-run

  auto late = done_.Get("late");
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(late.status().message().find("Request timeout expired"), std::string::npos)
      << late.status().message();
  EXPECT_NE(late.status().message().find("terminated"), std::string::npos);
  EXPECT_EQ(gate_->terminations(), 1);
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 1u);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), 0u);
  EXPECT_EQ(Outcome(RequestOutcome::kInternal), 0u);
  EXPECT_EQ(stats_->terminated_executions.load(), 1u);
  EXPECT_EQ(stats_->execution_count.load(), 0u);
  EXPECT_EQ(stats_->fail.count.load(), 1u);

  // The instance is free again and serves the next batch normally.
  gate_->Release(1);
  scheduler_->Submit(Request("next", 5, /*timeout_us=*/1000));
  ExpectSuccess("next", 5);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), 1u);
  EXPECT_EQ(gate_->terminations(), 1);
  EXPECT_EQ(scheduler_->BusyInstances(), 0u);
}

TEST_F(RunWatchdogTest, BatchWithOneLiveRequestIsNotTerminated) {
  Start();
  scheduler_->Submit(Request("blocker", 0));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  scheduler_->Submit(Request("short", 1, /*timeout_us=*/1000));
  scheduler_->Submit(Request("long", 2, /*timeout_us=*/10'000'000));
  gate_->Release(1);  // the blocker finishes; short + long run as one batch
  ASSERT_TRUE(gate_->WaitForRuns(2));
  ExpectSuccess("blocker", 0);

  AdvanceAndSettle(2ms);  // "short" is past its deadline, "long" is not
  EXPECT_EQ(gate_->terminations(), 0);
  AdvanceAndSettle(5s);
  EXPECT_EQ(gate_->terminations(), 0);
  EXPECT_FALSE(done_.Done("short"));

  gate_->Release(1);
  ExpectSuccess("short", 1);  // it started before its deadline: answered
  ExpectSuccess("long", 2);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), 3u);
  EXPECT_EQ(stats_->terminated_executions.load(), 0u);
}

TEST_F(RunWatchdogTest, LastLiveDeadlinePassingTerminatesTheBatch) {
  Start();
  scheduler_->Submit(Request("blocker", 0));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  scheduler_->Submit(Request("a", 1, /*timeout_us=*/1000));
  scheduler_->Submit(Request("b", 2, /*timeout_us=*/50'000));
  gate_->Release(1);
  ASSERT_TRUE(gate_->WaitForRuns(2));
  AdvanceAndSettle(2ms);
  EXPECT_EQ(gate_->terminations(), 0);
  clock_->Advance(60ms);
  for (const char* id : {"a", "b"}) {
    auto r = done_.Get(id);
    ASSERT_FALSE(r.ok()) << id;
    EXPECT_NE(r.status().message().find("Request timeout expired"), std::string::npos);
  }
  EXPECT_EQ(gate_->terminations(), 1);
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 2u);
  EXPECT_EQ(stats_->terminated_executions.load(), 1u);
}

TEST_F(RunWatchdogTest, CancelledRequestsTerminateTheRun) {
  Start();
  auto flag = std::make_shared<CancelToken>();
  scheduler_->Submit(Request("gone", 1, /*timeout_us=*/0, flag));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  clock_->Advance(1s);  // no deadline: time alone never ends it
  EXPECT_EQ(gate_->terminations(), 0);
  flag->Cancel();  // wakes the watchdog itself, the clock standing still

  auto r = done_.Get("gone");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(Outcome(RequestOutcome::kCancelled), 1u);
  EXPECT_EQ(stats_->terminated_executions.load(), 1u);

  gate_->Release(1);
  scheduler_->Submit(Request("after", 3));
  ExpectSuccess("after", 3);
}

TEST_F(RunWatchdogTest, MixOfCancelledAndExpiredIsTerminatedEachWithItsReason) {
  Start();
  scheduler_->Submit(Request("blocker", 0));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  auto flag = std::make_shared<CancelToken>();
  scheduler_->Submit(Request("cancelled", 1, /*timeout_us=*/0, flag));
  scheduler_->Submit(Request("expired", 2, /*timeout_us=*/1000));
  gate_->Release(1);
  ASSERT_TRUE(gate_->WaitForRuns(2));
  // "expired" is dead, "cancelled" alive (no deadline): nothing to wait for
  // until a cancellation.
  clock_->Advance(2ms);
  EXPECT_EQ(gate_->terminations(), 0);
  flag->Cancel();
  EXPECT_EQ(done_.Get("cancelled").status().code(), StatusCode::kCancelled);
  EXPECT_EQ(done_.Get("expired").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(Outcome(RequestOutcome::kCancelled), 1u);
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 1u);
  EXPECT_EQ(gate_->terminations(), 1);
}

TEST_F(RunWatchdogTest, OnlyTheDeadBatchOfTwoInstancesIsTerminated) {
  Start(/*instances=*/2);
  scheduler_->Submit(Request("dies", 1, /*timeout_us=*/1000));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  scheduler_->Submit(Request("lives", 2, /*timeout_us=*/10'000'000));
  ASSERT_TRUE(gate_->WaitForRuns(2));
  clock_->Advance(2ms);
  EXPECT_EQ(done_.Get("dies").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(gate_->terminations(), 1);
  gate_->Release(1);
  ExpectSuccess("lives", 2);
}

TEST_F(RunWatchdogTest, ShutdownWithAWatchedRunFinishesIt) {
  Start();
  scheduler_->Submit(Request("r", 1, /*timeout_us=*/10'000'000));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  gate_->Release(1);
  scheduler_->Shutdown();
  ExpectSuccess("r", 1);
}

// Threads of this process named `name` (/proc/self/task/*/comm).
int ThreadsNamed(const std::string& name) {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++count;
  }
  return count;
}

TEST_F(RunWatchdogTest, TheThreadStartsWithTheFirstBatchThatCanDie) {
  Start();
  EXPECT_EQ(ThreadsNamed("watch-fake"), 0);  // an idle model has no watchdog thread
  scheduler_->Submit(Request("immortal", 1));  // no deadline, no cancel token: never watched
  ASSERT_TRUE(gate_->WaitForRuns(1));
  gate_->Release(1);
  ExpectSuccess("immortal", 1);
  EXPECT_EQ(ThreadsNamed("watch-fake"), 0);

  scheduler_->Submit(Request("late", 2, /*timeout_us=*/1000));
  ASSERT_TRUE(gate_->WaitForRuns(2));
  clock_->Advance(2ms);  // the thread, started by this batch, finds it dead
  auto late = done_.Get("late");
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("terminated"), std::string::npos) << late.status().message();
  EXPECT_EQ(ThreadsNamed("watch-fake"), 1);
}

TEST_F(RunWatchdogTest, TrySubmitKeepsTheRequestWhenTheQueueIsFull) {
  DynamicBatcherOptions o;
  o.model_name = "fake";
  o.model_version = "1";
  o.queueing.default_max_queue_size = 1;
  stats_ = std::make_unique<ModelStatistics>(0);
  auto created = DynamicBatcher::Create(std::move(o), MakeFakeInstances(gate_, 1, {"OUTPUT0"}), stats_.get(),
                                        &completer_, clock_);
  ASSERT_TRUE(created.ok());
  scheduler_ = std::move(created).value();

  auto running = Request("running", 1);
  ASSERT_TRUE(scheduler_->TrySubmit(running).ok());
  EXPECT_EQ(running, nullptr);
  ASSERT_TRUE(gate_->WaitForRuns(1));
  auto queued = Request("queued", 2);
  ASSERT_TRUE(scheduler_->TrySubmit(queued).ok());
  auto extra = Request("extra", 3);
  Status full = scheduler_->TrySubmit(extra);
  EXPECT_EQ(full.code(), StatusCode::kUnavailable);
  EXPECT_NE(full.message().find("queue is full"), std::string::npos) << full.message();
  ASSERT_NE(extra, nullptr);  // still ours: not completed, not counted
  EXPECT_FALSE(done_.Done("extra"));
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), 0u);
  gate_->Release(2);
  ExpectSuccess("running", 1);
  ExpectSuccess("queued", 2);
}

TEST_F(RunWatchdogTest, ExpectedWaitUsesQueueDepthAndAverageExecution) {
  Start(/*instances=*/1, /*max_batch_size=*/0);
  const auto probe = [&](uint64_t timeout_us) {
    auto r = Request("probe", 0, timeout_us);
    return scheduler_->ExpectedToMissDeadline(*r);
  };
  EXPECT_FALSE(probe(1)) << "no execution measured yet: no estimate";
  gate_->AdvanceDuringRun(clock_.get(), 100ms);  // every run "takes" 100 ms
  gate_->Release(1);
  scheduler_->Submit(Request("first", 1));
  ExpectSuccess("first", 1);

  scheduler_->Submit(Request("busy", 2));
  ASSERT_TRUE(gate_->WaitForRuns(2));
  for (int i = 0; i < 3; ++i) scheduler_->Submit(Request("q" + std::to_string(i), 3));
  EXPECT_EQ(scheduler_->QueueDepth(), 3u);
  EXPECT_TRUE(probe(250'000));   // 3 x 100 ms ahead
  EXPECT_FALSE(probe(400'000));
  EXPECT_FALSE(probe(0));        // no timeout: never misses
  gate_->Release(4);
  for (int i = 0; i < 3; ++i) ExpectSuccess("q" + std::to_string(i), 3);
}

}  // namespace
}  // namespace ortserve

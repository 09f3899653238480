// The dynamic batcher's queue policies (bounds, timeouts, priorities), run
// failures and shutdown (tests/unit/DynamicBatcherFixture.h says how they are
// driven).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "DynamicBatcherFixture.h"

namespace ortserve {
namespace {

using namespace testing_util;

class BatcherPolicyTest : public SchedulerTest {};
INSTANTIATE_TEST_SUITE_P(Instances, BatcherPolicyTest, ::testing::Values(1, 2, 4), InstancesName);

// ---- queue policies -------------------------------------------------------------

TEST_P(BatcherPolicyTest, FullQueueRejectsAtOnceNamingTheLimit) {
  auto options = BatchingOptions();
  options.queueing.default_policy.max_queue_size = 2;
  Start(options);
  OccupyAllInstances();
  Submit(Request("q1", 1, 4, 10));
  Submit(Request("q2", 1, 4, 20));
  Submit(Request("q3", 1, 4, 30));
  ASSERT_TRUE(done_.Done("q3"));
  auto rejected = done_.Get("q3");
  EXPECT_EQ(rejected.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(rejected.status().message(), "model 'fake' version '3' queue is full (max_queue_size 2)");
  model_->Open();
  ExpectAddOne("q1", 1, 4, 10);
  ExpectAddOne("q2", 1, 4, 20);
  scheduler_->Shutdown();
  EXPECT_EQ(stats_->fail.count.load(), 1u);
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), 1u);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), stats_->success.count.load());
}

TEST_P(BatcherPolicyTest, UnboundedPolicyUsesTheDefaultBound) {
  auto options = BatchingOptions();
  options.queueing.default_max_queue_size = 1;
  Start(options);
  OccupyAllInstances();
  Submit(Request("q1", 1, 4, 10));
  Submit(Request("q2", 1, 4, 20));
  EXPECT_NE(done_.Get("q2").status().message().find("max_queue_size 1"), std::string::npos);
  model_->Open();
  ExpectAddOne("q1", 1, 4, 10);
}

TEST_P(BatcherPolicyTest, RequestExpiredInQueueIsAnsweredAndNeverComputed) {
  auto options = BatchingOptions();
  options.queueing.default_policy.default_timeout_us = 1000;
  Start(options);
  OccupyAllInstances();
  Submit(Request("late", 1, 4, 777));
  clock_->Advance(2ms);
  Submit(Request("fresh", 1, 4, 10));
  model_->Open();
  auto late = done_.Get("late");
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(late.status().message().find("Request timeout expired"), std::string::npos);
  ExpectAddOne("fresh", 1, 4, 10);
  EXPECT_FALSE(model_->EverComputed(777));
  scheduler_->Shutdown();
  // The blockers' deadlines passed while they ran, so the run watchdog
  // (tests/unit/scheduler_run_watchdog_test.cpp) may stop each of them — or
  // Open() may release it first; either way a stopped blocker is one more
  // timeout, never a rejection.
  EXPECT_LE(stats_->terminated_executions.load(), instances());
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 1u + stats_->terminated_executions.load());
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), 0u);
}

TEST_P(BatcherPolicyTest, ExpiryWakesAWorkerWaitingForItsWindow) {
  auto options = BatchingOptions();
  options.batching.max_queue_delay_us = 10'000'000;
  Start(options);
  auto r = Request("t", 1, 4, 777);
  r->timeout_us = 100;  // no default timeout: the request's own applies
  Submit(std::move(r));
  clock_->Advance(200us);
  EXPECT_EQ(done_.Get("t").status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(model_->EverComputed(777));
}

TEST_P(BatcherPolicyTest, DelayedRequestRunsAfterTheOthers) {
  auto options = BatchingOptions(0);
  options.queueing.default_policy.timeout_action = QueuePolicy::TimeoutAction::kDelay;
  Start(options);
  OccupyAllInstances();
  auto d = Request("delayed", 1, 4, 500);
  d->timeout_us = 1000;
  Submit(std::move(d));
  Submit(Request("on-time", 1, 4, 600));
  clock_->Advance(2ms);
  model_->Release(1);  // frees exactly one worker
  ASSERT_TRUE(model_->WaitForRuns(instances() + 1));
  model_->Open();
  ExpectAddOne("delayed", 1, 4, 500);
  ExpectAddOne("on-time", 1, 4, 600);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].values.front(), 600);
  EXPECT_EQ(runs[1].values.front(), 500);
}

TEST_P(BatcherPolicyTest, CancelledRequestIsDroppedAndNeverComputed) {
  Start(BatchingOptions());
  OccupyAllInstances();
  auto r = Request("gone", 1, 4, 777);
  r->cancelled = std::make_shared<CancelToken>();
  auto flag = r->cancelled;
  Submit(std::move(r));
  Submit(Request("kept", 1, 4, 10));
  flag->Cancel();
  model_->Open();
  EXPECT_EQ(done_.Get("gone").status().code(), StatusCode::kCancelled);
  ExpectAddOne("kept", 1, 4, 10);
  EXPECT_FALSE(model_->EverComputed(777));
  scheduler_->Shutdown();
  EXPECT_EQ(Outcome(RequestOutcome::kCancelled), 1u);
}

TEST_P(BatcherPolicyTest, HigherPriorityRunsFirst) {
  auto options = BatchingOptions(0);
  options.queueing.priority_levels = 2;
  options.queueing.default_priority_level = 2;
  Start(options);
  OccupyAllInstances();
  auto low = Request("low", 1, 4, 200);
  low->priority = 2;
  auto unset = Request("default", 1, 4, 300);  // priority 0: level 2
  auto high = Request("high", 1, 4, 100);
  high->priority = 1;
  Submit(std::move(low));
  Submit(std::move(unset));
  Submit(std::move(high));
  model_->Release(1);
  ASSERT_TRUE(model_->WaitForRuns(instances() + 1));
  EXPECT_EQ(BatchRuns().at(0).values.front(), 100);
  model_->Open();
  ExpectAddOne("high", 1, 4, 100);
  ExpectAddOne("low", 1, 4, 200);
  ExpectAddOne("default", 1, 4, 300);
  if (instances() == 1) {  // one worker: the whole order is observable
    auto runs = BatchRuns();
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[1].values.front(), 200);
    EXPECT_EQ(runs[2].values.front(), 300);
  }
}

// ---- failures and outputs -------------------------------------------------------

TEST_P(BatcherPolicyTest, RunFailureFailsEveryRequestOfTheBatch) {
  Start(BatchingOptions());
  OccupyAllInstances();
  model_->FailRunsWith("fake instance exploded");
  for (int i = 0; i < 3; ++i) Submit(Request("r" + std::to_string(i), 1, 4, 10));
  model_->Open();
  for (int i = 0; i < 3; ++i) {
    auto result = done_.Get("r" + std::to_string(i));
    EXPECT_EQ(result.status().code(), StatusCode::kInternal);
    EXPECT_EQ(result.status().message(), "fake instance exploded");
  }
  scheduler_->Shutdown();  // the blockers finish too: stats are final
  EXPECT_EQ(BatchRuns().size(), 1u);
  EXPECT_EQ(stats_->fail.count.load(), instances() + 3);
  EXPECT_EQ(Outcome(RequestOutcome::kInternal), instances() + 3);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), 0u);
  EXPECT_EQ(stats_->request_duration.Read().count, 0u);
  EXPECT_EQ(stats_->success.count.load(), 0u);
  EXPECT_EQ(stats_->execution_count.load(), 0u);
}

TEST_P(BatcherPolicyTest, OutputWithWrongBatchDimensionFailsNamingIt) {
  Start(BatchingOptions());
  model_->AddOutputRow();
  Submit(Request("r", 2, 4, 10));
  auto result = done_.Get("r");
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
  EXPECT_NE(result.status().message().find("'OUTPUT0'"), std::string::npos)
      << result.status().message();
}

// ---- shutdown ---------------------------------------------------------------------

TEST_P(BatcherPolicyTest, ShutdownDrainsTheQueueThenRejects) {
  Start(BatchingOptions());
  OccupyAllInstances();
  for (int i = 0; i < 3; ++i) Submit(Request("r" + std::to_string(i), 1, 4, 10.f * (i + 1)));
  std::thread stopper([&] { scheduler_->Shutdown(); });
  model_->Open();
  stopper.join();
  for (int i = 0; i < 3; ++i) ExpectAddOne("r" + std::to_string(i), 1, 4, 10.f * (i + 1));
  for (size_t i = 0; i < instances(); ++i) EXPECT_TRUE(done_.Get("blocker-" + std::to_string(i)).ok());

  Submit(Request("after", 1, 4, 0));
  ASSERT_TRUE(done_.Done("after"));
  auto after = done_.Get("after");
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(after.status().message(), "model 'fake' version '3' is shutting down");
  scheduler_->Shutdown();  // idempotent
  EXPECT_EQ(scheduler_->BusyInstances(), 0u);
}

TEST_P(BatcherPolicyTest, ShutdownPastItsDeadlineAnswersWhatIsLeftWith503) {
  Start(BatchingOptions());
  OccupyAllInstances();
  Submit(Request("queued-a", 1, 4, 777));
  Submit(Request("queued-b", 1, 4, 777));
  const Clock::time_point deadline = clock_->Now() + 30s;
  std::thread stopper([&] { scheduler_->Shutdown(deadline); });
  EXPECT_FALSE(done_.Done("queued-a"));  // still within the exit timeout
  clock_->Advance(30s);
  for (const char* id : {"queued-a", "queued-b"}) {
    auto result = done_.Get(id);
    ASSERT_FALSE(result.ok()) << id;
    EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(result.status().message().find("is shutting down"), std::string::npos)
        << result.status().message();
  }
  model_->Open();  // the runs were stopped at the deadline: this changes nothing
  stopper.join();
  const size_t n = instances();
  for (size_t i = 0; i < n; ++i) {
    auto result = done_.Get("blocker-" + std::to_string(i));
    ASSERT_FALSE(result.ok());  // stopped at the deadline, whatever the run returned
    EXPECT_NE(result.status().message().find("stopped at the exit timeout"), std::string::npos)
        << result.status().message();
  }
  EXPECT_FALSE(model_->EverComputed(777));
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), n + 2);
  EXPECT_EQ(stats_->terminated_executions.load(), n);
}

TEST_P(BatcherPolicyTest, ShutdownWithADeadlineComputesWhatFinishesInTime) {
  Start(BatchingOptions());
  OccupyAllInstances();
  Submit(Request("queued", 1, 4, 10));
  const Clock::time_point deadline = clock_->Now() + 30s;
  std::thread stopper([&] { scheduler_->Shutdown(deadline); });
  model_->Open();  // the fake clock never reaches the deadline
  ExpectAddOne("queued", 1, 4, 10);
  stopper.join();
  for (size_t i = 0; i < instances(); ++i) EXPECT_TRUE(done_.Get("blocker-" + std::to_string(i)).ok());
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), 0u);
}

TEST_P(BatcherPolicyTest, DestructionRunsABatchStillInItsWindow) {
  auto options = BatchingOptions();
  options.batching.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 1, 4, 20));
  scheduler_.reset();
  ExpectAddOne("a", 1, 4, 10);
  ExpectAddOne("b", 1, 4, 20);
}

TEST_P(BatcherPolicyTest, ConcurrentSubmitsAndShutdownAnswerEveryRequestOnce) {
  auto options = BatchingOptions(4);
  options.batching.max_queue_delay_us = 0;
  Start(options);
  constexpr int kThreads = 4, kPerThread = 50;
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int n = t * kPerThread + i;
        Submit(Request("c" + std::to_string(n), 1 + n % 2, 2, static_cast<float>(n)));
      }
    });
  }
  std::thread stopper([&] { scheduler_->Shutdown(); });
  for (auto& c : clients) c.join();
  stopper.join();
  uint64_t ok = 0;
  for (int n = 0; n < kThreads * kPerThread; ++n) {
    const std::string id = "c" + std::to_string(n);
    auto result = done_.Get(id);
    if (result.ok()) {
      ++ok;
      ExpectAddOne(id, 1 + n % 2, 2, static_cast<float>(n));
    } else {
      EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().message();
    }
  }
  EXPECT_EQ(stats_->success.count.load(), ok);
}

}  // namespace
}  // namespace ortserve

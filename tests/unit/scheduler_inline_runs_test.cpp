// Inline runs (scheduler/DynamicBatcher.h): a cheap model's lone request runs
// on the thread that submits it, when that thread allows it
// (core/InlineRuns.h), under the worker's rules: deadlines and cancellation
// reach into the run, statistics count it, the thread budget bounds it, and a
// request that is not alone batches as before. Driven as
// tests/unit/DynamicBatcherFixture.h says; nothing asserts on timing.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "DynamicBatcherFixture.h"
#include "core/InlineRuns.h"

namespace ortserve {
namespace {

using namespace testing_util;

class InlineRunTest : public SchedulerTest {
 protected:
  static DynamicBatcherOptions InlineOptions() {
    auto o = BatchingOptions();
    o.compute.inline_run_max_us = 50;
    return o;
  }

  // What an HTTP I/O thread with one client connection lets run inline.
  std::atomic<int> one_client_{1};

  // The first run is always a worker's: inline runs need a measured one.
  void Warm() {
    Submit(Request("warm", 1, 2, -5));
    ExpectAddOne("warm", 1, 2, -5);
  }

  // The thread that ran the request whose INPUT0 started with `base`.
  std::thread::id RanOn(float base) {
    for (const auto& run : model_->Runs())
      if (!run.values.empty() && run.values.front() == base) return run.thread;
    return {};
  }

  // Lone requests one after another, each answered before the next, until
  // one runs on this thread (after an answer, the worker takes the leader's
  // role back within moments; once it holds it, every lone request runs
  // inline). Returns how many were sent, or -1 if none ran inline.
  int SubmitUntilInline(const std::string& prefix, float base, int tries = 2000) {
    for (int i = 0; i < tries; ++i) {
      const std::string id = prefix + std::to_string(i);
      Submit(Request(id, 1, 2, base + static_cast<float>(10 * i)));
      ExpectAddOne(id, 1, 2, base + static_cast<float>(10 * i));
      if (RanOn(base + static_cast<float>(10 * i)) == std::this_thread::get_id()) return i + 1;
    }
    return -1;
  }

  // Starts a thread of its own whose earlier lone request ran inline (so
  // `request` does too: the leader kept its role) and returns it once
  // `request` is inside its run, held at the gate; the caller opens the gate
  // and joins the thread.
  std::thread StartHeldInline(std::unique_ptr<InferenceRequest> request) {
    std::promise<void> warmed;
    std::future<void> warmed_future = warmed.get_future();
    std::promise<void> go;
    std::thread submitter([this, warmed = std::move(warmed), go_future = go.get_future(),
                           request = std::move(request)]() mutable {
      InlineRunsScope allow(&one_client_);
      EXPECT_GT(SubmitUntilInline("w", 1000), 0);
      warmed.set_value();
      go_future.wait();
      Submit(std::move(request));
    });
    warmed_future.wait();
    const size_t runs = model_->Runs().size();
    model_->Hold();
    go.set_value();
    EXPECT_TRUE(model_->WaitForRuns(runs + 1));
    return submitter;
  }

  // StartHeldInline, then `stop` while the run is held; returns the thread's
  // id once Submit returned (before the gate opens).
  std::thread::id HeldInline(std::unique_ptr<InferenceRequest> request, const std::function<void()>& stop) {
    std::thread submitter = StartHeldInline(std::move(request));
    const std::thread::id id = submitter.get_id();
    stop();
    submitter.join();
    model_->Open();
    return id;
  }

  // `n` lone requests, each answered before the next; how many ran here.
  int InlineOf(int n, float base) {
    int here = 0;
    for (int i = 0; i < n; ++i) {
      const std::string id = "lone" + std::to_string(i);
      Submit(Request(id, 1, 2, base + static_cast<float>(10 * i)));
      ExpectAddOne(id, 1, 2, base + static_cast<float>(10 * i));
      if (RanOn(base + static_cast<float>(10 * i)) == std::this_thread::get_id()) ++here;
    }
    return here;
  }
};

INSTANTIATE_TEST_SUITE_P(Instances, InlineRunTest, ::testing::Values(1, 2), InstancesName);

TEST_P(InlineRunTest, LoneCheapRequestRunsOnTheSubmittingThreadAndIsCounted) {
  Start(InlineOptions());
  Warm();
  InlineRunsScope allow(&one_client_);
  const int sent = SubmitUntilInline("a", 1000);
  ASSERT_GT(sent, 0) << "no lone request ran on the submitting thread";
  // The leader kept its role through the inline run: the next one is inline too.
  Submit(Request("next", 1, 2, 7));
  EXPECT_TRUE(done_.Done("next"));
  EXPECT_EQ(RanOn(7), std::this_thread::get_id());
  ExpectAddOne("next", 1, 2, 7);

  scheduler_->Shutdown();
  const uint64_t requests = 1 + static_cast<uint64_t>(sent) + 1;
  EXPECT_EQ(stats_->execution_count.load(), requests);
  EXPECT_EQ(stats_->inference_count.load(), requests);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), requests);
  EXPECT_EQ(stats_->BatchStatAt(1).compute_infer.count.load(), requests);
  EXPECT_EQ(scheduler_->BusyInstances(), 0u);
}

TEST_P(InlineRunTest, ThreadsThatDoNotAllowItNeverRunInline) {
  Start(InlineOptions());
  Warm();
  EXPECT_EQ(InlineOf(50, 1000), 0);
}

TEST_P(InlineRunTest, ThreadsServingSeveralConnectionsHandEachRequestOver) {
  Start(InlineOptions());
  Warm();
  std::atomic<int> connections{2};
  InlineRunsScope allow(&connections);
  EXPECT_EQ(InlineOf(50, 1000), 0);
  connections = 1;  // the other client left
  EXPECT_GT(SubmitUntilInline("b", 5000), 0);
}

TEST_P(InlineRunTest, ModelsWithoutABoundNeverRunInline) {
  Start(BatchingOptions());
  Warm();
  InlineRunsScope allow(&one_client_);
  EXPECT_EQ(InlineOf(50, 1000), 0);
}

TEST_P(InlineRunTest, SlowModelNeverRunsInline) {
  Start(InlineOptions());
  model_->AdvanceDuringRun(clock_.get(), std::chrono::milliseconds(1));  // 1 ms runs, 50 us bound
  Warm();
  InlineRunsScope allow(&one_client_);
  EXPECT_EQ(InlineOf(50, 1000), 0);
}

TEST_P(InlineRunTest, RequestsArrivingWhileEveryInstanceIsBusyStillBatch) {
  Start(InlineOptions());
  Warm();
  model_->Hold();  // every instance busy (the fixture's OccupyAllInstances counts from no run)
  for (size_t i = 0; i < instances(); ++i) {
    Submit(Request("blocker-" + std::to_string(i), 1, 1, -1));
    ASSERT_TRUE(model_->WaitForRuns(2 + i));
  }
  ASSERT_EQ(scheduler_->BusyInstances(), instances());
  InlineRunsScope allow(&one_client_);
  for (int i = 0; i < 3; ++i) Submit(Request("q" + std::to_string(i), 1, 2, 100.f * (i + 1)));
  EXPECT_EQ(scheduler_->QueueDepth(), 3u);
  model_->Open();
  for (int i = 0; i < 3; ++i) ExpectAddOne("q" + std::to_string(i), 1, 2, 100.f * (i + 1));
  std::vector<Shape> shapes;
  for (const auto& run : BatchRuns())
    if (run.values.front() >= 100) shapes.push_back(run.shape);
  EXPECT_EQ(shapes, (std::vector<Shape>{{3, 2}}));
  EXPECT_NE(RanOn(100), std::this_thread::get_id());
}

TEST_P(InlineRunTest, TheBatchingWindowStillHoldsALoneRequest) {
  auto options = InlineOptions();
  options.batching.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("warm", 1, 2, -5));
  clock_->Advance(std::chrono::seconds(10));
  ExpectAddOne("warm", 1, 2, -5);
  InlineRunsScope allow(&one_client_);
  Submit(Request("lone", 1, 2, 40));
  EXPECT_FALSE(done_.Done("lone"));  // Triton's window: it waits for company
  clock_->Advance(std::chrono::seconds(10));
  ExpectAddOne("lone", 1, 2, 40);
  EXPECT_NE(RanOn(40), std::this_thread::get_id());
}

TEST_P(InlineRunTest, TheThreadBudgetBoundsInlineRuns) {
  auto options = InlineOptions();
  auto slots = std::make_shared<ComputeSlots>(1);
  options.compute.slots = slots;
  Start(options);
  Warm();
  InlineRunsScope allow(&one_client_);
  ASSERT_GT(SubmitUntilInline("a", 1000), 0);
  std::optional<ComputeSlots::Lease> taken;
  taken.emplace(slots->Acquire(1));  // another model computes on the one slot
  Submit(Request("waits", 1, 2, 60));
  EXPECT_FALSE(done_.Done("waits"));  // queued for the worker, which waits for the slot
  taken.reset();
  ExpectAddOne("waits", 1, 2, 60);
  EXPECT_NE(RanOn(60), std::this_thread::get_id());
}

// Once the inline run gives its instance back, the worker may run the
// request queued meanwhile on that instance while the inline run's thread is
// still answering: each must answer from its own results (under
// ThreadSanitizer, `make tsan`, a shared run record is a reported race).
TEST_P(InlineRunTest, ARequestQueuedDuringAnInlineRunIsAnsweredFromItsOwnRun) {
  Start(InlineOptions());
  Warm();
  std::thread submitter = StartHeldInline(Request("inline", 1, 2, 90));
  const std::thread::id submitter_id = submitter.get_id();
  Submit(Request("queued", 1, 2, 95));  // this thread hands it over: it queues
  model_->Open();
  ExpectAddOne("inline", 1, 2, 90);
  ExpectAddOne("queued", 1, 2, 95);
  submitter.join();
  EXPECT_EQ(RanOn(90), submitter_id);
  EXPECT_NE(RanOn(95), std::this_thread::get_id());
}

TEST_P(InlineRunTest, ADeadlineReachesIntoAnInlineRun) {
  Start(InlineOptions());
  Warm();
  auto late = Request("late", 1, 2, 70);
  late->timeout_us = 1000;
  const std::thread::id submitter = HeldInline(std::move(late), [&] { clock_->Advance(std::chrono::milliseconds(2)); });
  EXPECT_EQ(RanOn(70), submitter);
  auto result = done_.Get("late");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("Request timeout expired"), std::string::npos) << result.status().message();
  EXPECT_EQ(model_->terminations(), 1);
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 1u);
  EXPECT_EQ(stats_->terminated_executions.load(), 1u);
}

TEST_P(InlineRunTest, CancellationReachesIntoAnInlineRun) {
  Start(InlineOptions());
  Warm();
  auto gone = Request("gone", 1, 2, 80);
  auto flag = std::make_shared<CancelToken>();
  gone->cancelled = flag;
  const std::thread::id submitter = HeldInline(std::move(gone), [&] { flag->Cancel(); });
  EXPECT_EQ(RanOn(80), submitter);
  EXPECT_EQ(done_.Get("gone").status().code(), StatusCode::kCancelled);
  EXPECT_EQ(Outcome(RequestOutcome::kCancelled), 1u);
  EXPECT_EQ(stats_->terminated_executions.load(), 1u);
}

}  // namespace
}  // namespace ortserve

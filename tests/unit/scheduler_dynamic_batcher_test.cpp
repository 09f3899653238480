// The dynamic batcher's batching: which requests run together, and when
// (tests/unit/DynamicBatcherFixture.h says how they are driven).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "DynamicBatcherFixture.h"

namespace ortserve {
namespace {

using namespace testing_util;

INSTANTIATE_TEST_SUITE_P(Instances, SchedulerTest, ::testing::Values(1, 2, 4), InstancesName);

// ---- batching -------------------------------------------------------------------

TEST_P(SchedulerTest, RequestsQueuedWhileBusyRunAsOneBatch) {
  Start(BatchingOptions());
  OccupyAllInstances();
  for (int i = 0; i < 5; ++i) Submit(Request("r" + std::to_string(i), 1, 4, 100.f * (i + 1)));
  EXPECT_EQ(scheduler_->QueueDepth(), 5u);
  model_->Open();
  for (int i = 0; i < 5; ++i) ExpectAddOne("r" + std::to_string(i), 1, 4, 100.f * (i + 1));

  scheduler_->Shutdown();  // the blockers finish too: stats are final
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].shape, (Shape{5, 4}));
  const uint64_t n = instances();
  EXPECT_EQ(stats_->execution_count.load(), n + 1);
  EXPECT_EQ(stats_->inference_count.load(), n + 5);
  EXPECT_LT(stats_->execution_count.load(), stats_->inference_count.load());
  EXPECT_EQ(stats_->BatchStatAt(5).compute_infer.count.load(), 1u);
  EXPECT_EQ(stats_->compute_infer.count.load(), n + 5);  // per request, Triton-style
  EXPECT_EQ(scheduler_->QueueDepth(), 0u);
}

TEST_P(SchedulerTest, EachCallerGetsItsOwnRows) {
  Start(BatchingOptions());
  OccupyAllInstances();
  Submit(Request("one", 1, 3, 10));
  Submit(Request("three", 3, 3, 20));
  Submit(Request("two", 2, 3, 50));
  model_->Open();
  ExpectAddOne("one", 1, 3, 10);
  ExpectAddOne("three", 3, 3, 20);
  ExpectAddOne("two", 2, 3, 50);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].shape, (Shape{6, 3}));
}

TEST(BatchingPolicyDefaults, DefaultWindowIsTritons) {
  EXPECT_FALSE(BatchingPolicy{}.adaptive_window);
}

// Batches are runs of consecutive compatible requests (Triton's): w4b does
// not overtake w3 to join w4a.
TEST_P(SchedulerTest, IncompatibleShapesDoNotBatchTogether) {
  Start(BatchingOptions());
  OccupyAllInstances();
  Submit(Request("w4a", 1, 4, 10));
  Submit(Request("w4b", 1, 4, 20));
  Submit(Request("w3", 1, 3, 30));
  Submit(Request("w4c", 1, 4, 40));
  model_->Open();
  ExpectAddOne("w4a", 1, 4, 10);
  ExpectAddOne("w4b", 1, 4, 20);
  ExpectAddOne("w3", 1, 3, 30);
  ExpectAddOne("w4c", 1, 4, 40);
  std::multiset<Shape> shapes;
  for (const auto& run : BatchRuns()) shapes.insert(run.shape);
  EXPECT_EQ(shapes, (std::multiset<Shape>{{2, 4}, {1, 3}, {1, 4}}));
}

// Grouped by shape (shape buckets): w4c passes over w3 to join w4a and w4b,
// and w3 runs in a batch of its own shape; its window is not waited for,
// since the instance had other work queued.
TEST_P(SchedulerTest, GroupedByShapeLaterRequestsOfTheHeadsShapeJoin) {
  auto options = BatchingOptions();
  options.batching.group_by_shape = true;
  Start(options);
  OccupyAllInstances();
  Submit(Request("w4a", 1, 4, 10));
  Submit(Request("w4b", 1, 4, 20));
  Submit(Request("w3", 1, 3, 30));
  Submit(Request("w4c", 1, 4, 40));
  model_->Open();
  ExpectAddOne("w4a", 1, 4, 10);
  ExpectAddOne("w4b", 1, 4, 20);
  ExpectAddOne("w3", 1, 3, 30);
  ExpectAddOne("w4c", 1, 4, 40);
  std::multiset<Shape> shapes;
  for (const auto& run : BatchRuns()) shapes.insert(run.shape);
  EXPECT_EQ(shapes, (std::multiset<Shape>{{3, 4}, {1, 3}}));
}

// Triton's test_multi_batch_different_shape: a request that cannot join the
// pending batch releases it at once; the newcomer then waits its own window.
TEST_P(SchedulerTest, DifferentShapeReleasesThePendingBatch) {
  auto options = BatchingOptions();
  options.batching.preferred_batch_sizes = {2, 6};
  options.batching.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("a", 1, 16, 10));
  EXPECT_FALSE(done_.Done("a"));  // waits the window: 1 is not preferred
  clock_->Advance(1s);
  EXPECT_FALSE(done_.Done("a"));
  Submit(Request("b", 1, 8, 20));
  ExpectAddOne("a", 1, 16, 10);  // released by b; the clock stays at 1 s
  EXPECT_FALSE(done_.Done("b"));
  clock_->Advance(9s);  // a's window would be over, b's is not
  EXPECT_FALSE(done_.Done("b"));
  clock_->Advance(1s);
  ExpectAddOne("b", 1, 8, 20);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].shape, (Shape{1, 16}));
  EXPECT_EQ(runs[1].shape, (Shape{1, 8}));
}

// Triton's test_multi_batch_preferred_different_shape: 1 + 3 rows (no
// preferred size) are released by a request of another shape, which reaches
// preferred size 6 with the next one and goes at once too.
TEST_P(SchedulerTest, DifferentShapeReleasesThenReachesAPreferredSize) {
  auto options = BatchingOptions();
  options.batching.preferred_batch_sizes = {2, 6};
  options.batching.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("a", 1, 16, 10));
  Submit(Request("b", 3, 16, 20));
  EXPECT_FALSE(done_.Done("a"));
  Submit(Request("c", 1, 8, 30));
  Submit(Request("d", 5, 8, 40));
  ExpectAddOne("a", 1, 16, 10);  // the fake clock never moved
  ExpectAddOne("b", 3, 16, 20);
  ExpectAddOne("c", 1, 8, 30);
  ExpectAddOne("d", 5, 8, 40);
  std::multiset<Shape> shapes;
  for (const auto& run : BatchRuns()) shapes.insert(run.shape);
  EXPECT_EQ(shapes, (std::multiset<Shape>{{4, 16}, {6, 8}}));
}

// A partial batch waits the whole window however idle the model is.
TEST_P(SchedulerTest, PartialBatchWaitsTheWholeDelay) {
  auto options = BatchingOptions();
  options.batching.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  clock_->Advance(9999ms);
  EXPECT_FALSE(done_.Done("a"));
  clock_->Advance(1ms);
  ExpectAddOne("a", 1, 4, 10);
}

TEST_P(SchedulerTest, BatchesNeverExceedMaxBatchSizeAndRequestsNeverSplit) {
  Start(BatchingOptions(4));
  OccupyAllInstances();
  Submit(Request("a", 2, 2, 10));
  Submit(Request("b", 2, 2, 20));
  Submit(Request("c", 1, 2, 30));
  Submit(Request("d", 3, 2, 40));
  model_->Open();
  ExpectAddOne("a", 2, 2, 10);
  ExpectAddOne("b", 2, 2, 20);
  ExpectAddOne("c", 1, 2, 30);
  ExpectAddOne("d", 3, 2, 40);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) EXPECT_EQ(run.shape, (Shape{4, 2}));
}

TEST_P(SchedulerTest, PreferredBatchSizeRunsWithoutWaitingForTheWindow) {
  auto options = BatchingOptions();
  options.batching.preferred_batch_sizes = {2};
  options.batching.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 1, 4, 20));
  ExpectAddOne("a", 1, 4, 10);  // the fake clock has not moved
  ExpectAddOne("b", 1, 4, 20);

  Submit(Request("c", 1, 4, 30));
  EXPECT_FALSE(done_.Done("c"));  // waits for a partner or the window
  clock_->Advance(10s);
  ExpectAddOne("c", 1, 4, 30);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].shape, (Shape{2, 4}));
  EXPECT_EQ(runs[1].shape, (Shape{1, 4}));
}

TEST_P(SchedulerTest, QueueDelayGathersRequestsUntilTheWindowCloses) {
  auto options = BatchingOptions();
  options.batching.max_queue_delay_us = 5'000;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 2, 4, 20));
  Submit(Request("c", 1, 4, 30));
  EXPECT_FALSE(done_.Done("a"));
  clock_->Advance(5ms);
  ExpectAddOne("a", 1, 4, 10);
  ExpectAddOne("b", 2, 4, 20);
  ExpectAddOne("c", 1, 4, 30);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].shape, (Shape{4, 4}));
}

TEST_P(SchedulerTest, FullBatchDoesNotWaitForTheWindow) {
  auto options = BatchingOptions(2);
  options.batching.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 1, 4, 20));
  ExpectAddOne("a", 1, 4, 10);
  ExpectAddOne("b", 1, 4, 20);
}

// Balancing instances: a worker takes its share of the work in hand (the rows
// planned and those running elsewhere, over the instances), whole requests,
// and the rest runs at once on the others.
TEST_P(SchedulerTest, InstancesShareAPlannedBatch) {
  auto options = BatchingOptions();
  options.batching.max_queue_delay_us = 10'000'000;
  options.compute.balance_across_instances = true;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 2, 4, 20));
  Submit(Request("c", 1, 4, 40));
  Submit(Request("d", 1, 4, 50));
  EXPECT_FALSE(done_.Done("a"));  // the window gathers them first
  // 5 rows. One instance takes all. Two: a + b (share 3), then c + d (5 in
  // hand with the 3 running: share 3). Four: a (share 2: b's 2 rows do not
  // fit after a's 1), b (4 planned + 1 running: share 2), c + d (2 + 3).
  const std::map<size_t, std::multiset<int64_t>> expected{{1, {5}}, {2, {3, 2}}, {4, {1, 2, 2}}};
  // Runs held until all have started: a run ended early would change the
  // rows in hand.
  model_->Hold();
  clock_->Advance(10s);
  ASSERT_TRUE(model_->WaitForRuns(expected.at(instances()).size()));
  model_->Open();
  ExpectAddOne("a", 1, 4, 10);
  ExpectAddOne("b", 2, 4, 20);
  ExpectAddOne("c", 1, 4, 40);
  ExpectAddOne("d", 1, 4, 50);
  std::multiset<int64_t> sizes;
  for (const auto& run : BatchRuns()) sizes.insert(run.shape[0]);
  EXPECT_EQ(sizes, expected.at(instances()));
}

// Instances that cannot compute at once (compute slots) do not split it.
TEST_P(SchedulerTest, InstancesShareOnlyAsFarAsComputeSlotsGo) {
  auto options = BatchingOptions();
  options.compute.balance_across_instances = true;
  options.compute.slots = std::make_shared<ComputeSlots>(2);
  options.compute.slots_per_run = 2;  // one run at a time
  ExpectWindowedRequestsRunWhole(options);
}

// Without the option (Triton's dispatch) the batch stays whole.
TEST_P(SchedulerTest, WithoutBalancingTheBatchStaysWhole) {
  ExpectWindowedRequestsRunWhole(BatchingOptions());
}

TEST_P(SchedulerTest, AdaptiveWindowRunsALoneRequestAtOnce) {
  auto options = BatchingOptions();
  options.batching.max_queue_delay_us = 10'000'000;
  options.batching.adaptive_window = true;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  ExpectAddOne("a", 1, 4, 10);  // no arrival was expected: no wait (clock not moved)
}

TEST_P(SchedulerTest, AdaptiveWindowWaitsForTheClientsItAnsweredThenRunsAtOnce) {
  auto options = BatchingOptions();
  options.batching.max_queue_delay_us = 10'000'000;
  options.batching.adaptive_window = true;
  Start(options);
  OccupyAllInstances();
  for (const char* id : {"x", "y", "z"}) Submit(Request(id, 1, 4, 10));
  model_->Open();
  const size_t n = instances();
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(done_.Get("blocker-" + std::to_string(i)).ok());
  // The n answered clients are expected back: x, y, z wait for them.
  EXPECT_FALSE(done_.Done("x"));
  for (size_t i = 0; i < n; ++i) Submit(Request("back-" + std::to_string(i), 1, 4, 50));
  // The last expected arrival closes the window; the fake clock never moved.
  ExpectAddOne("x", 1, 4, 10);
  for (size_t i = 0; i < n; ++i) ExpectAddOne("back-" + std::to_string(i), 1, 4, 50);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].shape, (Shape{static_cast<int64_t>(3 + n), 4}));

  // 3 + n clients are now expected, but only one comes back: the others'
  // expectations lapse after ArrivalForecast's patience, long before the
  // 10 s window, and are dropped.
  Submit(Request("late", 1, 4, 60));
  EXPECT_FALSE(done_.Done("late"));
  clock_->Advance(ArrivalForecast::kMinPatience);
  ExpectAddOne("late", 1, 4, 60);
  Submit(Request("next", 1, 4, 70));  // expects only "late"'s client: runs at once
  ExpectAddOne("next", 1, 4, 70);
  EXPECT_EQ(BatchRuns().size(), 3u);
}

TEST_P(SchedulerTest, WithoutDynamicBatchingEachRequestRunsAlone) {
  auto options = BatchingOptions();
  options.batching.dynamic_batching = false;
  Start(options);
  OccupyAllInstances();
  Submit(Request("a", 2, 4, 10));
  Submit(Request("b", 2, 4, 20));
  Submit(Request("c", 1, 4, 30));
  model_->Open();
  ExpectAddOne("a", 2, 4, 10);
  ExpectAddOne("b", 2, 4, 20);
  ExpectAddOne("c", 1, 4, 30);
  scheduler_->Shutdown();  // the blockers finish too: stats are final
  EXPECT_EQ(BatchRuns().size(), 3u);
  EXPECT_EQ(stats_->inference_count.load(), instances() + 5);
  EXPECT_EQ(stats_->execution_count.load(), instances() + 3);
}

TEST_P(SchedulerTest, NoBatchDimensionPassesTensorsThroughAsIs) {
  Start(BatchingOptions(0));
  OccupyAllInstances();
  std::vector<const std::byte*> sent;
  for (int i = 0; i < 3; ++i) {
    auto r = Request("r" + std::to_string(i), 1, 4, 10.f * (i + 1));
    r->inputs[0].shape = {4};  // no batch dimension
    sent.push_back(r->inputs[0].data.data());
    Submit(std::move(r));
  }
  model_->Open();
  for (int i = 0; i < 3; ++i) {
    auto result = done_.Get("r" + std::to_string(i));
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(result.value().outputs[0].shape, (Shape{4}));
  }
  scheduler_->Shutdown();  // the blockers finish too: stats are final
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 3u);
  for (const auto& run : runs) {
    EXPECT_EQ(run.shape, (Shape{4}));
    EXPECT_NE(std::find(sent.begin(), sent.end(), run.data), sent.end()) << "input was copied";
  }
  EXPECT_EQ(stats_->inference_count.load(), instances() + 3);
  EXPECT_EQ(stats_->BatchStatAt(1).compute_infer.count.load(), instances() + 3);
}

TEST_P(SchedulerTest, SingleRequestBatchIsNotCopied) {
  Start(BatchingOptions());
  auto r = Request("solo", 2, 4, 10);
  const std::byte* sent = r->inputs[0].data.data();
  Submit(std::move(r));
  ExpectAddOne("solo", 2, 4, 10);
  ASSERT_EQ(BatchRuns().size(), 1u);
  EXPECT_EQ(BatchRuns()[0].data, sent);
}

TEST_P(SchedulerTest, BytesAreStackedAndSplitByLengthPrefix) {
  Start(BatchingOptions());
  OccupyAllInstances();
  auto a = Request("a", 1, 1, 0);
  a->inputs[0] = Strings("INPUT0", {1, 1}, {"a"});
  auto b = Request("b", 2, 1, 0);
  b->inputs[0] = Strings("INPUT0", {2, 1}, {"bb", ""});
  Submit(std::move(a));
  Submit(std::move(b));
  model_->Open();
  auto ra = done_.Get("a");
  auto rb = done_.Get("b");
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra.value().outputs[0].shape, (Shape{1, 1}));
  EXPECT_EQ(DecodeStrings(ra.value().outputs[0].data), (std::vector<std::string>{"a!"}));
  EXPECT_EQ(rb.value().outputs[0].shape, (Shape{2, 1}));
  EXPECT_EQ(DecodeStrings(rb.value().outputs[0].data), (std::vector<std::string>{"bb!", "!"}));
  EXPECT_EQ(DecodeStrings(rb.value().outputs[1].data), (std::vector<std::string>{"bb", ""}));
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].strings, (std::vector<std::string>{"a", "bb", ""}));
}

// ---- creation -----------------------------------------------------------------------

TEST(DynamicBatcherCreate, RejectsInvalidOptions) {
  ModelStatistics stats(8);
  CallbackCompleter completer;
  auto make = [&](DynamicBatcherOptions o, int n) {
    std::vector<std::unique_ptr<ModelInstance>> list;
    auto model = std::make_shared<FakeInstanceControl>();
    list = MakeFakeInstances(model, static_cast<size_t>(n));
    return DynamicBatcher::Create(std::move(o), std::move(list), &stats, &completer);
  };
  EXPECT_FALSE(make(BatchingOptions(), 0).ok());
  auto preferred = BatchingOptions(4);
  preferred.batching.preferred_batch_sizes = {8};
  EXPECT_EQ(make(preferred, 1).status().code(), StatusCode::kInvalidArgument);
  auto priority = BatchingOptions();
  priority.queueing.priority_levels = 2;
  priority.queueing.default_priority_level = 0;
  EXPECT_FALSE(make(priority, 1).ok());
  priority.queueing.default_priority_level = 1;
  priority.queueing.level_policies = {{3, QueuePolicy{}}};
  EXPECT_FALSE(make(priority, 1).ok());
  EXPECT_TRUE(make(BatchingOptions(), 2).ok());
}

TEST(DynamicBatcherCreate, RealClockBatchesConcurrentTraffic) {
  ModelStatistics stats(4);
  auto model = std::make_shared<FakeInstanceControl>();
  auto list = MakeFakeInstances(model, 2);
  auto options = BatchingOptions(4);
  options.batching.max_queue_delay_us = 500;
  RecordedCompletions done;  // outlives the scheduler, which may still call back
  CallbackCompleter completer;
  auto created = DynamicBatcher::Create(options, std::move(list), &stats, &completer);
  ASSERT_TRUE(created.ok());
  auto scheduler = std::move(created).value();
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto r = std::make_unique<InferenceRequest>();
        r->id = std::to_string(t * 25 + i);
        r->inputs.push_back(Fp32("INPUT0", {1, 1}, {static_cast<float>(t * 25 + i)}));
        r->on_complete = done.For(r->id);
        scheduler->Submit(std::move(r));
      }
    });
  }
  for (auto& c : clients) c.join();
  for (int n = 0; n < 100; ++n) {
    auto result = done.Get(std::to_string(n));
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(Floats(result.value().outputs[0]), (std::vector<float>{n + 1.f}));
  }
  scheduler.reset();
  EXPECT_EQ(stats.inference_count.load(), 100u);
  EXPECT_EQ(stats.success.count.load(), 100u);
}

}  // namespace
}  // namespace ortserve

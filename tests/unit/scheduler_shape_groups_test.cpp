// Batching grouped by shape (shape buckets, BatchingPolicy::group_by_shape):
// each shape batches as if it had a queue of its own. Widths 8, 16 and 32
// stand for three buckets. Driven on the fake clock (tests/unit/
// DynamicBatcherFixture.h); every "nothing else ran" is checked after the
// batcher has looked at the queue and chosen to wait (FakeSchedulerClock::
// AwaitWaits), so no check depends on a thread being slow.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "DynamicBatcherFixture.h"
#include "scheduler/BatchAssembler.h"

namespace ortserve {
namespace {

using namespace testing_util;

constexpr uint64_t kWindowUs = 10'000'000;  // 10 s

class ShapeGroupTest : public SchedulerTest {
 protected:
  struct Sent {
    int64_t rows;
    int64_t width;
    float base;
  };

  void StartGrouped(int max_batch_size = 8, std::vector<int> preferred = {}) {
    auto options = BatchingOptions(max_batch_size);
    options.batching.group_by_shape = true;
    options.batching.max_queue_delay_us = kWindowUs;
    options.batching.preferred_batch_sizes = std::move(preferred);
    Start(options);
  }

  void Send(const std::string& id, int64_t width, int64_t rows = 1) {
    const Sent s{rows, width, 10.f * static_cast<float>(sent_.size() + 1)};
    sent_[id] = s;
    Submit(Request(id, s.rows, s.width, s.base));
  }

  // Sends `id` and waits until the batcher has planned with it queued and
  // chosen to wait: nothing may have run.
  void SendAndExpectWait(const std::string& id, int64_t width, int64_t rows = 1) {
    const uint64_t waits = clock_->WaitsStarted();
    Send(id, width, rows);
    ASSERT_TRUE(clock_->AwaitWaits(waits + 1)) << id;
    EXPECT_EQ(BatchRuns().size(), runs_seen_) << "a batch left when " << id << " was queued";
  }

  // `ids` ran as one batch of `shape`, and are answered their own rows.
  void ExpectBatch(const std::vector<std::string>& ids, Shape shape) {
    for (const std::string& id : ids) {
      const Sent& s = sent_.at(id);
      ExpectAddOne(id, s.rows, s.width, s.base);
    }
    ++runs_seen_;
    auto runs = BatchRuns();
    ASSERT_GE(runs.size(), runs_seen_);
    std::multiset<Shape> shapes;
    for (const auto& run : runs) shapes.insert(run.shape);
    EXPECT_TRUE(shapes.count(shape)) << "no batch of " << ids.size() << " rows of width " << shape[1];
  }

  // Moves the clock on; `released` (with `shape`) run, and the batcher then
  // waits again with the others queued: no further batch ran.
  void AdvanceExpectBatchThenWait(Clock::duration by, const std::vector<std::string>& released, Shape shape) {
    const uint64_t waits = clock_->WaitsStarted();
    clock_->Advance(by);
    ExpectBatch(released, shape);
    ASSERT_TRUE(clock_->AwaitWaits(waits + 1));
    EXPECT_EQ(BatchRuns().size(), runs_seen_);
  }

  // Moves the clock on and waits until the batcher looked again: nothing ran.
  void AdvanceExpectNothing(Clock::duration by) {
    const uint64_t waits = clock_->WaitsStarted();
    clock_->Advance(by);
    ASSERT_TRUE(clock_->AwaitWaits(waits + 1));
    EXPECT_EQ(BatchRuns().size(), runs_seen_);
  }

  std::map<std::string, Sent> sent_;
  size_t runs_seen_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Instances, ShapeGroupTest, ::testing::Values(1, 2, 4), InstancesName);

// Interleaved buckets no longer release each other: each gathers its own
// requests for the whole window, then each leaves as one batch, the bucket
// whose head is oldest first.
TEST_P(ShapeGroupTest, InterleavedBucketsEachGatherTheirOwnBatch) {
  StartGrouped();
  for (int round = 0; round < 3; ++round) {
    const std::string r = std::to_string(round);
    SendAndExpectWait("c" + r, 32);
    SendAndExpectWait("a" + r, 8);
    SendAndExpectWait("b" + r, 16);
  }
  AdvanceExpectNothing(std::chrono::microseconds(kWindowUs) - 1ms);
  clock_->Advance(1ms);  // every head's window is over at once
  ExpectBatch({"c0", "c1", "c2"}, {3, 32});
  ExpectBatch({"a0", "a1", "a2"}, {3, 8});
  ExpectBatch({"b0", "b1", "b2"}, {3, 16});
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 3u);
  if (instances() == 1) {  // one instance takes them in the order of their heads
    EXPECT_EQ(runs[0].shape, (Shape{3, 32}));
    EXPECT_EQ(runs[1].shape, (Shape{3, 8}));
    EXPECT_EQ(runs[2].shape, (Shape{3, 16}));
  }
}

// Each bucket's window starts at its own oldest request, and a bucket's
// later requests join its batch whatever arrived in between: every bucket
// leaves exactly one window after its head, none earlier, none later.
TEST_P(ShapeGroupTest, EachBucketWaitsItsOwnWindowFromItsOldestRequest) {
  StartGrouped();
  SendAndExpectWait("a0", 8);
  AdvanceExpectNothing(1s);
  SendAndExpectWait("b0", 16);
  AdvanceExpectNothing(1s);
  SendAndExpectWait("c0", 32);
  AdvanceExpectNothing(1s);
  const std::vector<std::pair<std::string, int64_t>> interleaved{{"a1", 8}, {"b1", 16}, {"c1", 32}, {"a2", 8}};
  for (const auto& [id, width] : interleaved) SendAndExpectWait(id, width);
  AdvanceExpectBatchThenWait(7s, {"a0", "a1", "a2"}, {3, 8});  // 10 s after a0
  SendAndExpectWait("a3", 8);  // after its bucket left: heads the next one
  AdvanceExpectBatchThenWait(1s, {"b0", "b1"}, {2, 16});
  AdvanceExpectBatchThenWait(1s, {"c0", "c1"}, {2, 32});
  AdvanceExpectNothing(7s);  // 9 s after a3 was queued
  clock_->Advance(1s);
  ExpectBatch({"a3"}, {1, 8});
  EXPECT_EQ(BatchRuns().size(), 4u);
}

// A bucket that fills up leaves at once while an older bucket still waits
// for its window: no instance waits while a batch may run; the older one
// still leaves when its window is over.
TEST_P(ShapeGroupTest, AFullBucketLeavesWhileAnOlderOneWaits) {
  StartGrouped(/*max_batch_size=*/4);
  SendAndExpectWait("a0", 8);
  for (const char* id : {"b0", "b1", "b2"}) SendAndExpectWait(id, 16);
  Send("b3", 16);
  ExpectBatch({"b0", "b1", "b2", "b3"}, {4, 16});
  EXPECT_FALSE(done_.Done("a0"));
  AdvanceExpectNothing(std::chrono::microseconds(kWindowUs) - 1ms);
  EXPECT_FALSE(done_.Done("a0"));
  clock_->Advance(1ms);
  ExpectBatch({"a0"}, {1, 8});
}

// A preferred size is reached within a bucket, not across buckets.
TEST_P(ShapeGroupTest, APreferredSizeCountsTheBucketsOwnRequests) {
  StartGrouped(/*max_batch_size=*/8, /*preferred=*/{2});
  SendAndExpectWait("a0", 8);
  SendAndExpectWait("b0", 16);  // two requests queued, one per bucket: no batch
  Send("a1", 8);
  ExpectBatch({"a0", "a1"}, {2, 8});
  EXPECT_FALSE(done_.Done("b0"));
  clock_->Advance(std::chrono::microseconds(kWindowUs));
  ExpectBatch({"b0"}, {1, 16});
}

// Within a bucket Triton's rule stands: a request of its own shape that
// does not fit releases the bucket's batch, and heads its next one.
TEST_P(ShapeGroupTest, ARequestOfItsOwnBucketThatDoesNotFitReleasesIt) {
  StartGrouped(/*max_batch_size=*/4);
  SendAndExpectWait("a0", 8, /*rows=*/3);
  SendAndExpectWait("b0", 16);
  Send("a1", 8, /*rows=*/2);
  ExpectBatch({"a0"}, {3, 8});
  Send("a2", 8, /*rows=*/2);  // a1 + a2 fill the next batch
  ExpectBatch({"a1", "a2"}, {4, 8});
  EXPECT_FALSE(done_.Done("b0"));
  clock_->Advance(std::chrono::microseconds(kWindowUs));
  ExpectBatch({"b0"}, {1, 16});
}

// ---- the assembler alone: which group goes --------------------------------------

class ShapeGroupPlan : public ::testing::Test {
 protected:
  ShapeGroupPlan() : queue_("model 'fake' version '3'", {QueuePolicy{}}, 100) {
    policy_.max_batch_size = 2;
    policy_.dynamic_batching = true;
    policy_.group_by_shape = true;
    policy_.max_queue_delay_us = kWindowUs;
  }

  InferenceRequest* Push(int64_t width, Clock::time_point at) {
    auto r = std::make_unique<InferenceRequest>();
    r->inputs.push_back(Fp32("INPUT0", {1, width}, std::vector<float>(static_cast<size_t>(width), 1.f)));
    InferenceRequest* raw = r.get();
    EXPECT_TRUE(queue_.Push(r, 1, 1, at).ok());
    return raw;
  }

  static std::vector<int64_t> Widths(const BatchPlan& plan) {
    std::vector<int64_t> widths;
    for (const QueuedRequest* m : plan.members) widths.push_back(m->request->inputs[0].shape[1]);
    return widths;
  }

  const Clock::time_point t0_ = Clock::time_point{} + std::chrono::hours(1);
  BatchingPolicy policy_;
  RequestQueue queue_;
};

// The rest of a batch that instances shared goes at once; the older head of
// another bucket keeps waiting for its window.
TEST_F(ShapeGroupPlan, TheRestOfASharedBatchGoesNotAnotherBucket) {
  policy_.max_batch_size = 8;
  const BatchAssembler assembler(policy_);
  Push(16, t0_);
  InferenceRequest* rest = Push(8, t0_ + 1s);
  Push(8, t0_ + 2s);
  const BatchPlan waiting = assembler.Plan(queue_, t0_ + 3s, {});
  EXPECT_TRUE(waiting.members.empty());
  EXPECT_EQ(waiting.wake_at, t0_ + std::chrono::microseconds(kWindowUs));
  const BatchPlan plan = assembler.Plan(queue_, t0_ + 3s, {.ready = rest});
  EXPECT_EQ(Widths(plan), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(Widths(assembler.Plan(queue_, t0_ + 3s, {.flush = true})), (std::vector<int64_t>{16}));
}

// Only the first kMaxShapeGroups shapes are planned: a full batch of a
// later shape waits until the groups before it have gone.
TEST_F(ShapeGroupPlan, ShapesPastTheGroupLimitWaitTheirTurn) {
  const BatchAssembler assembler(policy_);
  for (size_t i = 0; i < BatchAssembler::kMaxShapeGroups; ++i) Push(static_cast<int64_t>(i + 1), t0_);
  Push(99, t0_ + 1s);
  Push(99, t0_ + 1s);
  const BatchPlan plan = assembler.Plan(queue_, t0_ + 2s, {});
  EXPECT_TRUE(plan.members.empty());
  EXPECT_EQ(plan.wake_at, t0_ + std::chrono::microseconds(kWindowUs));
  const BatchPlan over = assembler.Plan(queue_, t0_ + std::chrono::microseconds(kWindowUs), {});
  EXPECT_EQ(Widths(over), (std::vector<int64_t>{1}));
}

// Without grouping (Triton's rule) the other shape releases the head at once.
TEST_F(ShapeGroupPlan, WithoutGroupingAnotherShapeReleasesTheHead) {
  policy_.group_by_shape = false;
  const BatchAssembler assembler(policy_);
  Push(8, t0_);
  Push(16, t0_);
  EXPECT_EQ(Widths(assembler.Plan(queue_, t0_, {})), (std::vector<int64_t>{8}));
}

}  // namespace
}  // namespace ortserve

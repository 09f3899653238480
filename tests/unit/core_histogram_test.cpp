#include "core/Histogram.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/ModelStatistics.h"

namespace ortserve {
namespace {

TEST(Histogram, BucketBoundsAreInclusiveUpperBounds) {
  Histogram h{10, 20, 40};
  for (uint64_t v : {0, 10, 11, 20, 21, 40, 41, 1000}) h.Observe(v);
  const Histogram::Snapshot s = h.Read();
  ASSERT_EQ(s.upper_bounds, (std::vector<uint64_t>{10, 20, 40}));
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 6}));  // le=10: 0,10; le=20: +11,20; le=40: +21,40
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(s.sum, 0u + 10 + 11 + 20 + 21 + 40 + 41 + 1000);
}

TEST(Histogram, EmptyHistogramReadsZeros) {
  const Histogram h = Histogram::Durations();
  const Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.upper_bounds.size(), 17u);
  EXPECT_EQ(s.upper_bounds.front(), 50'000u);
  EXPECT_EQ(s.upper_bounds.back(), 10'000'000'000u);
  for (uint64_t c : s.cumulative) EXPECT_EQ(c, 0u);
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.sum, 0u);
}

TEST(Histogram, UnorderedOrTooManyBoundsAreCut) {
  Histogram unordered{5, 3, 7};
  EXPECT_EQ(unordered.bucket_count(), 1u);
  Histogram many{1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13,
                 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26};
  EXPECT_EQ(many.bucket_count(), Histogram::kMaxBuckets);
  many.Observe(26);  // above every kept bound: only in the count
  const auto s = many.Read();
  EXPECT_EQ(s.cumulative.back(), 0u);
  EXPECT_EQ(s.count, 1u);
}

TEST(Histogram, BatchSizeBuckets) {
  Histogram h = Histogram::BatchSizes();
  h.Observe(1);
  h.Observe(3);
  h.Observe(4);
  h.Observe(5000);
  const auto s = h.Read();
  EXPECT_EQ(s.cumulative[0], 1u);  // le=1
  EXPECT_EQ(s.cumulative[1], 1u);  // le=2
  EXPECT_EQ(s.cumulative[2], 3u);  // le=4
  EXPECT_EQ(s.cumulative.back(), 3u);
  EXPECT_EQ(s.count, 4u);
}

// Concurrent observers lose nothing (relaxed atomics are still atomic).
TEST(Histogram, ConcurrentObserversCountEveryObservation) {
  Histogram h = Histogram::Durations();
  constexpr int kThreads = 4, kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < kPerThread; ++i) h.Observe(static_cast<uint64_t>((i * 7919 + t) % 20'000'000'000ll));
    });
  }
  for (auto& th : threads) th.join();
  const auto s = h.Read();
  EXPECT_EQ(s.count, uint64_t{kThreads} * kPerThread);
  for (size_t i = 1; i < s.cumulative.size(); ++i) EXPECT_LE(s.cumulative[i - 1], s.cumulative[i]);
  EXPECT_LE(s.cumulative.back(), s.count);
}

TEST(RequestOutcome, NamesAndStatusMapping) {
  EXPECT_STREQ(RequestOutcomeName(RequestOutcome::kSuccess), "success");
  EXPECT_STREQ(RequestOutcomeName(RequestOutcome::kInvalidInput), "invalid_input");
  EXPECT_STREQ(RequestOutcomeName(RequestOutcome::kInternal), "internal");
  EXPECT_EQ(OutcomeOfFailure(InvalidArgument("x")), RequestOutcome::kInvalidInput);
  EXPECT_EQ(OutcomeOfFailure(Unavailable("x")), RequestOutcome::kRejected);
  EXPECT_EQ(OutcomeOfFailure(Status(StatusCode::kCancelled, "x")), RequestOutcome::kCancelled);
  EXPECT_EQ(OutcomeOfFailure(Status(StatusCode::kDeadlineExceeded, "x")), RequestOutcome::kTimeout);
  EXPECT_EQ(OutcomeOfFailure(Internal("x")), RequestOutcome::kInternal);
}

}  // namespace
}  // namespace ortserve

// EvenSampler (the shadow comparison's and the access log's sampling): it
// takes exactly the fraction, spread evenly, all at 1 and none at 0.
#include "core/EvenSampler.h"

#include <gtest/gtest.h>

#include <vector>

namespace ortserve {
namespace {

TEST(EvenSampler, TakesExactlyTheFractionSpreadEvenly) {
  EvenSampler quarter(0.25);
  std::vector<int> taken;
  for (int i = 0; i < 100; ++i) {
    if (quarter.Take()) taken.push_back(i);
  }
  ASSERT_EQ(taken.size(), 25u);
  for (size_t i = 1; i < taken.size(); ++i) EXPECT_EQ(taken[i] - taken[i - 1], 4);
  EvenSampler all(1.0);
  int n = 0;
  for (int i = 0; i < 50; ++i) n += all.Take() ? 1 : 0;
  EXPECT_EQ(n, 50);
  EvenSampler rare(0.001);
  n = 0;
  for (int i = 0; i < 2999; ++i) n += rare.Take() ? 1 : 0;
  EXPECT_EQ(n, 2);
}

TEST(EvenSampler, KeepsExactlyTheRateOverAStream) {
  for (double rate : {0.0, 0.1, 0.25, 1.0 / 3, 0.5, 1.0}) {
    int kept = 0;
    for (uint64_t n = 0; n < 1200; ++n) kept += EvenSampler::Takes(n, rate) ? 1 : 0;
    EXPECT_EQ(kept, static_cast<int>(1200 * rate + 1e-9)) << rate;
  }
  EXPECT_TRUE(EvenSampler::Takes(0, 1.0));
  EXPECT_FALSE(EvenSampler::Takes(0, 0.0));
  EvenSampler clamped(-1.0);  // --access-log-sample-rate is clamped to [0, 1]
  EXPECT_FALSE(clamped.Take());
  EvenSampler over(2.0);
  EXPECT_TRUE(over.Take());
}

}  // namespace
}  // namespace ortserve

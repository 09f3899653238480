// DescriptorLimit: the soft RLIMIT_NOFILE is raised to the hard limit, and
// connection limits that do not fit are named in a warning.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "app/DescriptorLimit.h"

namespace ortserve::app {
namespace {

using ::testing::HasSubstr;

TEST(DescriptorLimit, RaisesTheSoftLimitToTheHardOne) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max < 256) GTEST_SKIP() << "needs a finite hard limit";
  rlimit lowered = limit;
  lowered.rlim_cur = 128;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);

  const DescriptorLimit raised = RaiseDescriptorLimit();
  EXPECT_TRUE(raised.error.empty()) << raised.error;
  EXPECT_EQ(raised.soft_before, 128u);
  EXPECT_EQ(raised.soft, static_cast<uint64_t>(limit.rlim_max));
  EXPECT_EQ(raised.hard, static_cast<uint64_t>(limit.rlim_max));
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, limit.rlim_max);
  // Raising again changes nothing.
  const DescriptorLimit again = RaiseDescriptorLimit();
  EXPECT_EQ(again.soft_before, again.soft);
}

TEST(DescriptorLimit, WarnsWhenTheConnectionLimitsDoNotFit) {
  EXPECT_FALSE(ConnectionLimitWarning(1024 + 64, 1 << 20));
  EXPECT_FALSE(ConnectionLimitWarning(1024 - kReservedDescriptors, 1024));
  const auto warning = ConnectionLimitWarning(1024 + 64, 1024);
  ASSERT_TRUE(warning);
  EXPECT_THAT(*warning, HasSubstr("add up to 1088 connections"));
  EXPECT_THAT(*warning, HasSubstr("descriptor limit of 1024"));
  EXPECT_THAT(*warning, HasSubstr("--http-max-connections"));
}

}  // namespace
}  // namespace ortserve::app

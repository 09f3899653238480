// InFlightHold: counted in from its making until it is released, destroyed or
// moved over; counted out once whatever happens; keeps the counter's owner
// alive while it counts.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <utility>

#include "server/common/InFlightCounter.h"

namespace ortserve::common {
namespace {

TEST(InFlightHold, CountsFromMakingUntilDestroyed) {
  InFlightCounter counter;
  {
    InFlightHold hold(counter);
    EXPECT_EQ(counter.count(), 1);
    InFlightHold second(counter);
    EXPECT_EQ(counter.count(), 2);
  }
  EXPECT_EQ(counter.count(), 0);
  EXPECT_TRUE(counter.WaitForZero(std::chrono::milliseconds(0)));
}

TEST(InFlightHold, ReleaseCountsOutOnceAndAnEmptyHoldNothing) {
  InFlightCounter counter;
  {
    InFlightHold hold(counter);
    hold.Release();
    EXPECT_EQ(counter.count(), 0);
    hold.Release();
    EXPECT_EQ(counter.count(), 0);
    InFlightHold empty;
    empty.Release();
  }
  EXPECT_EQ(counter.count(), 0);
}

TEST(InFlightHold, MovingHandsTheCountOverWithoutCountingOut) {
  InFlightCounter counter;
  InFlightHold target;
  {
    InFlightHold hold(counter);
    InFlightHold moved(std::move(hold));
    EXPECT_EQ(counter.count(), 1);
    target = std::move(moved);
    EXPECT_EQ(counter.count(), 1);
  }
  EXPECT_EQ(counter.count(), 1);  // the sources counted nothing out
  InFlightCounter other;
  target = InFlightHold(other);  // the old count ends, the new one begins
  EXPECT_EQ(counter.count(), 0);
  EXPECT_EQ(other.count(), 1);
  target.Release();
  EXPECT_EQ(other.count(), 0);
}

TEST(InFlightHold, KeepsTheCountersOwnerAliveUntilCountedOut) {
  struct Owner {
    InFlightCounter counter;
  };
  auto owner = std::make_shared<Owner>();
  const std::weak_ptr<Owner> watch = owner;
  InFlightHold hold(owner, &owner->counter);
  owner.reset();
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(watch.lock()->counter.count(), 1);
  hold.Release();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace ortserve::common

// Cancelling a request: the token reads cancelled, and every subscriber alive
// at that moment hears of it once, on the cancelling thread.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "core/Cancellation.h"

namespace ortserve {
namespace {

TEST(Cancellation, CancelMarksTheTokenAndCallsEverySubscriberOnce) {
  std::atomic<int> first{0}, second{0};
  CancelSubscription a([&] { ++first; });
  CancelSubscription b([&] { ++second; });
  CancelToken token;
  EXPECT_FALSE(token.IsCancelled());
  token.Cancel();
  EXPECT_TRUE(token.IsCancelled());
  EXPECT_EQ(first.load(), 1);
  EXPECT_EQ(second.load(), 1);
  token.Cancel();  // already cancelled: nobody is told again
  EXPECT_EQ(first.load(), 1);
  CancelToken other;
  other.Cancel();  // each token's first cancel is news
  EXPECT_EQ(first.load(), 2);
  EXPECT_EQ(second.load(), 2);
}

TEST(Cancellation, AGoneSubscriberIsNotCalled) {
  std::atomic<int> calls{0};
  std::optional<CancelSubscription> subscription;
  subscription.emplace([&] { ++calls; });
  subscription.reset();
  CancelToken token;
  token.Cancel();
  EXPECT_TRUE(token.IsCancelled());
  EXPECT_EQ(calls.load(), 0);
}

TEST(Cancellation, CallbackRunsOnTheCancellingThread) {
  std::thread::id seen;
  CancelSubscription subscription([&] { seen = std::this_thread::get_id(); });
  auto token = std::make_shared<CancelToken>();
  std::thread canceller([token] { token->Cancel(); });
  const std::thread::id canceller_id = canceller.get_id();
  canceller.join();
  EXPECT_EQ(seen, canceller_id);
}

}  // namespace
}  // namespace ortserve

#pragma once
// A manual clock for scheduler tests: time stands still until Advance(), which
// wakes every thread blocked in WaitUntil() so it re-checks its deadline.
// Thread-safe.
#include <vector>

#include "scheduler/SchedulerClock.h"

namespace ortserve {

class FakeSchedulerClock final : public SchedulerClock {
 public:
  // Starts at an arbitrary fixed point well away from the epoch.
  FakeSchedulerClock();

  Clock::time_point Now() const override;
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 Clock::time_point deadline) override;

  // Moves time forward and wakes all waiters. Must not be called with a
  // waiter's mutex held (it locks each one to notify without a lost wakeup).
  void Advance(Clock::duration by);

  // How many WaitUntil() calls have begun: a test that advanced the time can
  // wait for a thread's next wait to know it has looked at the new time.
  uint64_t WaitsStarted() const;
  // Blocks until WaitsStarted() reaches `n`; false after a long liveness
  // bound (never a timing assertion).
  bool AwaitWaits(uint64_t n) const;

 private:
  struct Waiter {
    std::condition_variable* cv;
    std::mutex* mu;
  };
  mutable std::mutex mu_;
  Clock::time_point now_;        // guarded by mu_
  std::vector<Waiter> waiters_;  // guarded by mu_; threads inside WaitUntil
  uint64_t waits_started_ = 0;   // guarded by mu_
  mutable std::condition_variable waits_cv_;  // notified as waits_started_ grows
};

}  // namespace ortserve

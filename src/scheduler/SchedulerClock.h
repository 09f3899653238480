#pragma once
// The scheduler's time source, injected so that batching windows and queue
// deadlines can be driven by hand in tests (tests/fakes/FakeSchedulerClock)
// instead of by sleeping. Production code uses SteadySchedulerClock.
#include <condition_variable>
#include <mutex>

#include "core/InferenceRequest.h"  // ortserve::Clock

namespace ortserve {

class SchedulerClock {
 public:
  virtual ~SchedulerClock() = default;

  virtual Clock::time_point Now() const = 0;

  // Blocks on `cv`, releasing `lock` while blocked, until `cv` is notified or
  // Now() reaches `deadline`. May return early; callers re-check their state.
  // `deadline` must not be Clock::time_point::max() (wait on `cv` instead).
  virtual void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         Clock::time_point deadline) = 0;
};

// std::chrono::steady_clock.
class SteadySchedulerClock final : public SchedulerClock {
 public:
  Clock::time_point Now() const override { return Clock::now(); }
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 Clock::time_point deadline) override {
    cv.wait_until(lock, deadline);
  }
};

}  // namespace ortserve

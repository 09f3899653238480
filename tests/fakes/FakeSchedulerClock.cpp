#include "fakes/FakeSchedulerClock.h"

#include <algorithm>

namespace ortserve {

FakeSchedulerClock::FakeSchedulerClock() : now_(Clock::time_point{} + std::chrono::hours(1)) {}

Clock::time_point FakeSchedulerClock::Now() const {
  std::lock_guard<std::mutex> guard(mu_);
  return now_;
}

void FakeSchedulerClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                                   Clock::time_point deadline) {
  {
    // Registering and checking the time under mu_ closes the window in which
    // an Advance() could slip between the caller's check and its wait: either
    // Advance ran first (we see the new time) or it sees us registered and
    // then blocks on `lock`'s mutex until cv.wait() has released it.
    std::lock_guard<std::mutex> guard(mu_);
    ++waits_started_;
    waits_cv_.notify_all();
    if (now_ >= deadline) return;
    waiters_.push_back({&cv, lock.mutex()});
  }
  cv.wait(lock);
  std::lock_guard<std::mutex> guard(mu_);
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [&](const Waiter& w) { return w.cv == &cv && w.mu == lock.mutex(); });
  if (it != waiters_.end()) waiters_.erase(it);
}

uint64_t FakeSchedulerClock::WaitsStarted() const {
  std::lock_guard<std::mutex> guard(mu_);
  return waits_started_;
}

bool FakeSchedulerClock::AwaitWaits(uint64_t n) const {
  std::unique_lock<std::mutex> lock(mu_);
  return waits_cv_.wait_for(lock, std::chrono::seconds(30), [&] { return waits_started_ >= n; });
}

void FakeSchedulerClock::Advance(Clock::duration by) {
  std::vector<Waiter> to_wake;
  {
    std::lock_guard<std::mutex> guard(mu_);
    now_ += by;
    to_wake = waiters_;
  }
  for (const Waiter& w : to_wake) {
    std::lock_guard<std::mutex> guard(*w.mu);
    w.cv->notify_all();
  }
}

}  // namespace ortserve

#pragma once
// How many infer requests (and, on HTTP, model loads and unloads) a front end
// has handed on and not yet had answered, so that shutdown can wait until
// every answer is back in the front end's hands. Thread-safe.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace ortserve::common {

class InFlightCounter {
 public:
  void Add() {
    std::lock_guard lock(mu_);
    ++count_;
  }
  // The waiter woken by the last Done() may destroy the counter as soon as
  // Done() has released the mutex; Done() touches nothing after that.
  void Done() {
    std::lock_guard lock(mu_);
    if (--count_ == 0) cv_.notify_all();
  }
  // False if `timeout` passed first.
  bool WaitForZero(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return count_ == 0; });
  }
  bool WaitForZeroUntil(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return count_ == 0; });
  }
  void WaitForZero() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return count_ == 0; });
  }
  int64_t count() const {
    std::lock_guard lock(mu_);
    return count_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t count_ = 0;  // guarded by mu_
};

}  // namespace ortserve::common

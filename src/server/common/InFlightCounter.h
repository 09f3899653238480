#pragma once
// How many infer requests (and, on HTTP, model loads and unloads) a front end
// has handed on and not yet had answered, so that shutdown can wait until
// every answer is back in the front end's hands. Thread-safe.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

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

// One thing counted in flight on an InFlightCounter: Add() when made, Done()
// when released or destroyed, whichever comes first; moved with what it
// counts. Not thread-safe itself (one owner at a time).
class InFlightHold {
 public:
  InFlightHold() = default;
  // `counter` must outlive the hold.
  explicit InFlightHold(InFlightCounter& counter) : InFlightHold(nullptr, &counter) {}
  // The hold keeps `owner` (whatever owns `counter`) alive.
  InFlightHold(std::shared_ptr<const void> owner, InFlightCounter* counter)
      : owner_(std::move(owner)), counter_(counter) {
    counter_->Add();
  }
  InFlightHold(InFlightHold&& other) noexcept
      : owner_(std::move(other.owner_)), counter_(std::exchange(other.counter_, nullptr)) {}
  InFlightHold& operator=(InFlightHold&& other) noexcept {
    if (this != &other) {
      Release();
      owner_ = std::move(other.owner_);
      counter_ = std::exchange(other.counter_, nullptr);
    }
    return *this;
  }
  InFlightHold(const InFlightHold&) = delete;
  InFlightHold& operator=(const InFlightHold&) = delete;
  ~InFlightHold() { Release(); }

  // Counted out now; nothing more when destroyed.
  void Release() {
    if (InFlightCounter* counter = std::exchange(counter_, nullptr)) counter->Done();
    owner_.reset();
  }

 private:
  std::shared_ptr<const void> owner_;
  InFlightCounter* counter_ = nullptr;
};

}  // namespace ortserve::common

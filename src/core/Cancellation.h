#pragma once
// A request's "its client is gone", and how whoever runs it hears of it at
// once.
//
// A front end gives each request a CancelToken and calls Cancel() when the
// client disconnects or cancels the call. Whoever may be running requests
// (the scheduler's run watchdog, which stops a run nobody waits for) holds a
// CancelSubscription for as long as it lives; Cancel() calls every
// subscriber, which then reads the tokens of what it runs.
//
// Why every subscriber rather than the one running the request: subscribers
// are few (one per model version) and one with nothing running returns at
// once, a request's token may be read by several schedulers (a fallback model
// answers with the request's token), and a request pays nothing on its way. Why not polling the tokens of
// running batches, as before: a poll every 5 ms woke the watchdog ~200 times a
// second under steady load (now: none), each wake-up taking a core from an
// inference thread, and a cancelled run went on until the next poll.
#include <atomic>
#include <functional>
#include <memory>

namespace ortserve {

class CancelToken {
 public:
  bool IsCancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }
  // Marks the request cancelled and calls every CancelSubscription, on the
  // calling thread; later calls do nothing. Never call it while holding a
  // lock a subscriber's callback takes.
  void Cancel();

 private:
  std::atomic<bool> cancelled_{false};
};

// Shared by a request and its front end; null: the request cannot be cancelled.
using CancelFlag = std::shared_ptr<CancelToken>;

class CancelSubscription {
 public:
  // `on_cancel` runs on the thread calling Cancel(), never after the
  // destructor has returned; it must be quick and must not call Cancel().
  explicit CancelSubscription(std::function<void()> on_cancel);
  ~CancelSubscription();
  CancelSubscription(const CancelSubscription&) = delete;
  CancelSubscription& operator=(const CancelSubscription&) = delete;

 private:
  friend class CancelToken;
  std::function<void()> on_cancel_;
};

}  // namespace ortserve

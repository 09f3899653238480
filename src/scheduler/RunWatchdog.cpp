#include "scheduler/RunWatchdog.h"

#include <algorithm>

#include "core/ThreadName.h"

namespace ortserve {

RunWatchdog::RunWatchdog(const std::string& model_name, std::vector<ModelInstance*> instances,
                         SchedulerClock* clock)
    : model_name_(model_name),
      instances_(std::move(instances)),
      clock_(clock),
      running_(instances_.size()) {}

RunWatchdog::~RunWatchdog() { Stop(); }

Clock::time_point RunWatchdog::RunningBatch::LastLiveDeadline() const {
  Clock::time_point last = Clock::time_point::min();
  for (const WatchedRequest& r : requests) {
    if (r.cancelled == nullptr || !r.cancelled->IsCancelled()) last = std::max(last, r.deadline);
  }
  return last;
}

bool RunWatchdog::Watch(size_t index, const std::vector<QueuedRequest>& batch) {
  {
    MutexLock lock(mu_);
    RunningBatch& running = running_[index];
    running.active = true;
    running.terminated = abandoned_;
    if (abandoned_) return false;
    running.watched = true;
    running.requests.clear();  // keeps its capacity: no allocation once warm
    for (const QueuedRequest& entry : batch) {
      const CancelToken* cancelled = entry.request->cancelled.get();
      // A request that can neither expire nor be cancelled keeps the whole
      // batch alive: nothing to watch.
      if (cancelled == nullptr && entry.deadline == Clock::time_point::max()) {
        running.requests.clear();
        running.watched = false;
        return true;
      }
      running.requests.push_back({entry.deadline, cancelled});
    }
    // The thread looks at every batch when it starts: no wake-up needed.
    if (!thread_.joinable() && !stopping_) {
      thread_ = std::thread([this] { Loop(); });
      return true;
    }
    // A further cancellation wakes the thread itself; otherwise the batch
    // can first be found dead at its last live deadline (already, if all its
    // requests were cancelled since the queue let them go).
    if (running.LastLiveDeadline() >= wake_at_) return true;  // it will look in time anyway
  }
  cv_.notify_one();
  return true;
}

RunWatchdog::RunEnd RunWatchdog::Unwatch(size_t index) {
  MutexLock lock(mu_);
  RunningBatch& running = running_[index];
  const bool terminated = running.active && running.terminated;
  running.active = false;
  running.watched = false;
  running.terminated = false;
  if (!terminated) return RunEnd::kRan;
  return abandoned_ ? RunEnd::kAbandoned : RunEnd::kDead;
}

void RunWatchdog::Abandon() {
  MutexLock lock(mu_);
  abandoned_ = true;
  for (size_t i = 0; i < running_.size(); ++i) {
    if (!running_[i].active || running_[i].terminated) continue;
    running_[i].terminated = true;
    instances_[i]->Terminate();  // thread-safe, returns at once
  }
}

void RunWatchdog::Stop() {
  std::thread thread;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
}

void RunWatchdog::Wake() {
  {
    // Under the lock, the wake-up comes after the thread's last look (a token
    // cancelled while it looks is seen by its next one), and a batch that
    // starts after this finds the token cancelled itself (Watch).
    MutexLock lock(mu_);
    // Nothing running that could die: no thread to wake (every watchdog
    // hears of every cancellation, and clients giving up under overload are
    // many).
    if (std::none_of(running_.begin(), running_.end(), [](const RunningBatch& r) { return r.Watchable(); })) {
      return;
    }
  }
  cv_.notify_one();
}

void RunWatchdog::Loop() {
  SetCurrentThreadName("watch-" + model_name_);
  MutexLock lock(mu_);
  while (!stopping_) {
    const Clock::time_point now = clock_->Now();
    Clock::time_point wake = Clock::time_point::max();
    for (size_t i = 0; i < running_.size(); ++i) {
      RunningBatch& running = running_[i];
      if (!running.Watchable()) continue;
      const Clock::time_point dies_at = running.LastLiveDeadline();
      if (dies_at <= now) {
        running.terminated = true;
        instances_[i]->Terminate();  // thread-safe, returns at once
        continue;
      }
      wake = std::min(wake, dies_at);
    }
    wake_at_ = wake;
    if (wake == Clock::time_point::max()) {
      lock.Wait(cv_);
    } else {
      clock_->WaitUntil(cv_, lock.native(), wake);
    }
    wake_at_ = Clock::time_point::min();  // awake: Watch's batch is seen before it sleeps again
  }
}

}  // namespace ortserve

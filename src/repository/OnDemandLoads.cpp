#include "repository/OnDemandLoads.h"

#include <algorithm>

#include "core/ThreadName.h"

namespace ortserve {

OnDemandLoads::OnDemandLoads(std::chrono::milliseconds max_wait, StartLoad start, Stamp stamp, Now now)
    : max_wait_(max_wait),
      start_(std::move(start)),
      stamp_(std::move(stamp)),
      now_(now ? std::move(now) : Now([] { return Clock::now(); })),
      timer_([this] { ExpireLoop(); }) {}

OnDemandLoads::~OnDemandLoads() { Stop(); }

void OnDemandLoads::Wait(const std::string& name, Clock::time_point deadline, Done done) {
  if (std::optional<Status> refused = BackingOff(name)) return done(*std::move(refused));
  deadline = std::min(deadline, Clock::now() + max_wait_);
  bool first = false;
  {
    MutexLock lock(mu_);
    if (stopping_) {
      lock.Unlock();
      return done(Unavailable("server is shutting down; model '" + name + "' was not loaded"));
    }
    auto [it, inserted] = loads_.try_emplace(name);
    first = inserted;
    if (first) it->second.started = Clock::now();
    it->second.waiters.push_back({deadline, std::move(done)});
    cv_.notify_all();
  }
  if (first) start_(name, [this, name](Status status) { Finished(name, status); });
}

void OnDemandLoads::Finished(const std::string& name, const Status& status) {
  const bool backs_off = !status.ok() && status.code() != StatusCode::kUnavailable;
  std::string stamp = backs_off && stamp_ ? stamp_(name) : std::string();
  Load load;
  {
    MutexLock lock(mu_);
    auto it = loads_.find(name);
    if (it == loads_.end()) return;  // stopped meanwhile: every waiter was answered
    load = std::move(it->second);
    loads_.erase(it);
    // With the load's end, so that no waiter comes between to start another.
    if (status.ok()) failures_.erase(name);
    if (backs_off) RecordFailureLocked(name, status, std::move(stamp));
  }
  if (status.ok()) {
    cold_starts_.Observe(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - load.started).count()));
  }
  for (auto& w : load.waiters) w.done(status);
}

void OnDemandLoads::RecordFailureLocked(const std::string& name, const Status& status, std::string stamp) {
  auto [it, first] = failures_.try_emplace(name);
  Failure& f = it->second;
  f.backoff = first ? kFirstBackoff : std::min(2 * f.backoff, kMaxBackoff);
  f.until = now_() + f.backoff;
  f.stamp = std::move(stamp);
  f.status = Status(status.code(), status.message() + " (the on-demand load is not retried for " +
                                       std::to_string(f.backoff.count() / 1000) +
                                       " s unless the model's files change or it is loaded explicitly)");
}

std::optional<Status> OnDemandLoads::BackingOff(const std::string& name) {
  Failure failed;
  {
    MutexLock lock(mu_);
    auto it = failures_.find(name);
    // Past its back-off the record stays: a failure in a row doubles it.
    if (it == failures_.end() || now_() >= it->second.until) return std::nullopt;
    failed = it->second;
  }
  if (stamp_ && stamp_(name) != failed.stamp) {
    Forget(name);
    return std::nullopt;
  }
  return failed.status;
}

void OnDemandLoads::Forget(const std::string& name) {
  MutexLock lock(mu_);
  failures_.erase(name);
}

void OnDemandLoads::Stop() {
  std::map<std::string, Load> left;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    left = std::move(loads_);
    loads_.clear();
    cv_.notify_all();
  }
  if (timer_.joinable()) timer_.join();
  for (auto& [name, load] : left) {
    for (auto& w : load.waiters) w.done(Unavailable("server is shutting down; model '" + name + "' was not loaded"));
  }
}

// Answers the waiters whose deadline passed; their load keeps its place (a
// key stays while the load runs, even with no waiter left, so that a later
// request joins it rather than starting another).
void OnDemandLoads::ExpireLoop() {
  SetCurrentThreadName("model-load-wait");
  MutexLock lock(mu_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    std::vector<std::pair<std::string, Done>> expired;
    for (auto& [name, load] : loads_) {
      auto& waiters = load.waiters;
      auto late = std::stable_partition(waiters.begin(), waiters.end(),
                                        [now](const Waiter& w) { return w.deadline > now; });
      for (auto it = late; it != waiters.end(); ++it) expired.emplace_back(name, std::move(it->done));
      waiters.erase(late, waiters.end());
      for (const auto& w : waiters) next = std::min(next, w.deadline);
    }
    if (!expired.empty()) {
      lock.Unlock();
      for (auto& [name, done] : expired) {
        done(Unavailable("model '" + name + "' is still loading: the request's wait for its on-demand load ran out "
                         "(--model-load-wait-secs or the request's own deadline)"));
      }
      lock.Lock();
      continue;
    }
    if (next == Clock::time_point::max()) {
      lock.Wait(cv_);
    } else {
      cv_.wait_until(lock.native(), next);
    }
  }
}

}  // namespace ortserve

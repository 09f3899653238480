#include "repository/OnDemandLoads.h"

#include <algorithm>

#include "core/ThreadName.h"

namespace ortserve {

OnDemandLoads::OnDemandLoads(std::chrono::milliseconds max_wait, StartLoad start)
    : max_wait_(max_wait), start_(std::move(start)), timer_([this] { ExpireLoop(); }) {}

OnDemandLoads::~OnDemandLoads() { Stop(); }

void OnDemandLoads::Wait(const std::string& name, Clock::time_point deadline, Done done) {
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
  Load load;
  {
    MutexLock lock(mu_);
    auto it = loads_.find(name);
    if (it == loads_.end()) return;  // stopped meanwhile: every waiter was answered
    load = std::move(it->second);
    loads_.erase(it);
  }
  if (status.ok()) {
    cold_starts_.Observe(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - load.started).count()));
  }
  for (auto& w : load.waiters) w.done(status);
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

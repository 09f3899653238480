#include "serving/VersionRollout.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace ortserve {
namespace {

int64_t TickNs(const RolloutConfig& config) {
  const double shortest = *std::min_element(config.step_seconds.begin(), config.step_seconds.end());
  return std::clamp<int64_t>(static_cast<int64_t>(shortest * 1e9 / 20), 10'000'000, 1'000'000'000);
}

int64_t Ns(VersionRollout::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

VersionCounters ReadCounters(const ModelStatistics& stats) {
  auto outcome = [&](RequestOutcome o) { return stats.outcomes[static_cast<size_t>(o)].load(std::memory_order_relaxed); };
  VersionCounters c;
  c.successes = outcome(RequestOutcome::kSuccess);
  c.errors = outcome(RequestOutcome::kInternal) + outcome(RequestOutcome::kTimeout);
  c.durations = stats.request_duration.Read();
  return c;
}

VersionRollout::VersionRollout(std::string model, RolloutConfig config)
    : model_(std::move(model)), config_(std::move(config)) {
  tick_ns_.store(TickNs(config_), std::memory_order_relaxed);
}

void VersionRollout::Restart(RolloutConfig config) {
  MutexLock lock(mu_);
  config_ = std::move(config);
  controller_.reset();
  tick_ns_.store(TickNs(config_), std::memory_order_relaxed);
  stable_id_.store(nullptr, std::memory_order_release);
  candidate_id_.store(nullptr, std::memory_order_release);
  weight_.store(0, std::memory_order_relaxed);
}

bool VersionRollout::Tracks(const RolloutPair& pair) const {
  return candidate_id_.load(std::memory_order_acquire) == pair.candidate_id &&
         stable_id_.load(std::memory_order_acquire) == pair.stable_id;
}

bool VersionRollout::RouteToCandidate(Clock::time_point now, const RolloutPair& pair) {
  const int64_t now_ns = Ns(now);
  int64_t due = next_tick_ns_.load(std::memory_order_relaxed);
  const bool tick = now_ns >= due && next_tick_ns_.compare_exchange_strong(
                                         due, now_ns + tick_ns_.load(std::memory_order_relaxed),
                                         std::memory_order_relaxed);
  if (tick || !Tracks(pair)) {
    MutexLock lock(mu_);
    SyncLocked(now, pair);
  }
  // Of any 100 consecutive requests, exactly `weight` go to the candidate,
  // spread evenly (the candidate's share of n requests is floor(n*w/100)).
  const uint64_t w = static_cast<uint64_t>(weight_.load(std::memory_order_relaxed));
  const uint64_t n = sequence_.fetch_add(1, std::memory_order_relaxed);
  return (n + 1) * w / 100 > n * w / 100;
}

void VersionRollout::SyncLocked(Clock::time_point now, const RolloutPair& pair) {
  const VersionCounters candidate = ReadCounters(*pair.candidate);
  const VersionCounters stable = ReadCounters(*pair.stable);
  if (!controller_ || !Tracks(pair)) {
    controller_.emplace(config_, now, candidate, stable);
    stable_id_.store(pair.stable_id, std::memory_order_release);
    candidate_id_.store(pair.candidate_id, std::memory_order_release);
    weight_.store(controller_->weight(), std::memory_order_relaxed);
    Count(RolloutEvent::kStarted, "step 1 (" + std::to_string(controller_->weight()) + "%)", pair);
    return;
  }
  if (auto transition = controller_->Update(now, candidate, stable)) {
    weight_.store(controller_->weight(), std::memory_order_relaxed);
    Count(transition->event, transition->detail, pair);
  }
}

void VersionRollout::Count(RolloutEvent event, const std::string& detail, const RolloutPair& pair) {
  events_[static_cast<size_t>(event)].fetch_add(1, std::memory_order_relaxed);
  const auto level = event == RolloutEvent::kRolledBack ? spdlog::level::warn : spdlog::level::info;
  spdlog::log(level, "model '{}' rollout of version {} over stable version {}: {} at weight {}%: {}", model_,
              pair.candidate_version, pair.stable_version, RolloutEventName(event), controller_->weight(), detail);
}

RolloutStatus VersionRollout::Status(Clock::time_point now, const std::optional<RolloutPair>& pair) {
  RolloutStatus s;
  s.model = model_;
  MutexLock lock(mu_);
  s.steps = config_.steps;
  for (size_t i = 0; i < kRolloutEventCount; ++i) s.events[i] = events_[i].load(std::memory_order_relaxed);
  if (!pair) {
    s.state = "inactive";
    s.reason = "a rollout needs two READY versions: a stable one and a newer candidate";
    return s;
  }
  SyncLocked(now, *pair);
  for (size_t i = 0; i < kRolloutEventCount; ++i) s.events[i] = events_[i].load(std::memory_order_relaxed);
  s.active = true;
  s.stable = pair->stable_version;
  s.candidate = pair->candidate_version;
  s.weight = controller_->weight();
  s.step = controller_->step();
  s.state = RolloutStateName(controller_->state());
  s.reason = controller_->reason();
  s.finished_steps = controller_->finished_steps();
  s.current_step = controller_->Current(now, ReadCounters(*pair->candidate), ReadCounters(*pair->stable));
  return s;
}

}  // namespace ortserve

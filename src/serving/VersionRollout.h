#pragma once
// One model's progressive canary at run time: which of its two newest READY
// versions answers a request that names no version, and the rollout's state
// for the rollout endpoint and the metrics. The decisions are
// RolloutController's; this class feeds it the versions' own statistics
// (ModelStatistics: successes, run failures and timeouts, the request
// duration histogram) and keeps the split.
//
// Request path: RouteToCandidate() is one relaxed atomic add and a few loads;
// at most once per tick interval (a twentieth of the shortest step, 10 ms ..
// 1 s) one request also reads both versions' statistics and updates the
// controller under this object's mutex. The rollout therefore moves only while
// requests arrive (or the rollout endpoint or metrics are read): a step
// without traffic cannot pass anyway (rollout_min_requests >= 1).
#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/RolloutConfig.h"
#include "core/ModelStatistics.h"
#include "core/Mutex.h"
#include "serving/RolloutController.h"

namespace ortserve {

// The two versions a rollout is between, as the model table sees them now.
// `*_id` identify the loaded model (a reload of the same version is a new
// one, and restarts the rollout).
struct RolloutPair {
  int64_t stable_version = 0;
  const ModelStatistics* stable = nullptr;
  const void* stable_id = nullptr;
  int64_t candidate_version = 0;
  const ModelStatistics* candidate = nullptr;
  const void* candidate_id = nullptr;
};

// What GET /v2/models/<m>/rollout and the metrics show.
struct RolloutStatus {
  std::string model;
  bool active = false;  // two READY versions: a stable and a candidate
  int64_t stable = 0;
  int64_t candidate = 0;
  int weight = 0;  // percent of unversioned traffic to the candidate
  size_t step = 0;  // 0-based; == steps.size() once promoted
  std::vector<int> steps;
  std::string state;  // RolloutStateName, or "inactive" when !active
  std::string reason;
  std::vector<RolloutStepFigures> finished_steps;
  std::optional<RolloutStepFigures> current_step;
  std::array<uint64_t, kRolloutEventCount> events{};
};

// The cumulative counters the analysis reads from a version's statistics:
// successes, run failures (internal) and timeouts, request durations.
VersionCounters ReadCounters(const ModelStatistics& stats);

class VersionRollout {
 public:
  using Clock = RolloutController::Clock;

  VersionRollout(std::string model, RolloutConfig config);

  // An operator's load or reload: the next request starts the rollout again
  // at step 0 with `config` (a rolled-back candidate gets a new chance).
  void Restart(RolloutConfig config) ORTSERVE_EXCLUDES(mu_);

  // Whether the rollout already runs on `pair` (same loaded models).
  bool Tracks(const RolloutPair& pair) const;

  // For one request that names no version: true when the candidate answers
  // it. A new pair starts a new rollout at step 0. Thread-safe.
  bool RouteToCandidate(Clock::time_point now, const RolloutPair& pair) ORTSERVE_EXCLUDES(mu_);

  // The state now (brought up to date first); `pair` nullopt: fewer than two
  // READY versions (inactive).
  RolloutStatus Status(Clock::time_point now, const std::optional<RolloutPair>& pair) ORTSERVE_EXCLUDES(mu_);

 private:
  void SyncLocked(Clock::time_point now, const RolloutPair& pair) ORTSERVE_REQUIRES(mu_);
  void Count(RolloutEvent event, const std::string& detail, const RolloutPair& pair) ORTSERVE_REQUIRES(mu_);

  const std::string model_;
  Mutex mu_;
  RolloutConfig config_ ORTSERVE_GUARDED_BY(mu_);
  std::optional<RolloutController> controller_ ORTSERVE_GUARDED_BY(mu_);
  // The pair the controller runs on; null while none (read without the lock
  // on the request path, written under it).
  std::atomic<const void*> stable_id_{nullptr};
  std::atomic<const void*> candidate_id_{nullptr};
  std::atomic<int> weight_{0};
  std::atomic<uint64_t> sequence_{0};       // unversioned requests routed: the split's position
  std::atomic<int64_t> next_tick_ns_{0};    // steady clock
  std::atomic<int64_t> tick_ns_{0};
  std::array<std::atomic<uint64_t>, kRolloutEventCount> events_{};
};

}  // namespace ortserve

#pragma once
// The progressive canary's decisions (config/RolloutConfig.h), pure and
// clocked: given each version's cumulative counters at `now`, it says which
// step the candidate is at, the share of unversioned traffic it takes, and
// when it advances, pauses, is promoted or rolled back. It reads no clock and
// no statistics itself (serving/VersionRollout.h feeds it), so tests drive it
// with a fake clock and made-up counters.
//
// Analysis per step, on the step's own window (counters minus those at the
// step's start):
// - breach, checked whenever the candidate has served rollout_min_requests in
//   the step (even before the step's time is up): error rate over
//   rollout_max_error_rate, p95 over rollout_max_p95_ms, or p95 over
//   rollout_max_p95_ratio times the stable version's p95 (when the stable
//   version answered in the step). Breach: weight 0, state rolled_back, final.
// - at the step's end: with fewer than rollout_min_requests candidate requests
//   the state is paused (the step waits for traffic); otherwise the next step
//   starts, and after the last one the candidate is promoted (weight 100, final).
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/RolloutConfig.h"
#include "core/Histogram.h"

namespace ortserve {

enum class RolloutState { kProgressing, kPaused, kPromoted, kRolledBack };
// "progressing", "paused", "promoted", "rolled_back".
const char* RolloutStateName(RolloutState state);

// The metrics endpoint's ortserve_rollout_events_total{event=...}.
enum class RolloutEvent { kStarted, kAdvanced, kPaused, kPromoted, kRolledBack };
inline constexpr size_t kRolloutEventCount = 5;
// "started", "advanced", "paused", "promoted", "rolled_back".
const char* RolloutEventName(RolloutEvent event);

// One version's cumulative counters, as its statistics hold them.
struct VersionCounters {
  uint64_t successes = 0;
  uint64_t errors = 0;              // requests its run failed or timed out
  Histogram::Snapshot durations;    // successful requests, ns (Histogram::Durations)
};

// One version's figures over a window.
struct WindowFigures {
  uint64_t requests = 0;  // successes + errors
  uint64_t errors = 0;
  double error_rate = 0;
  std::optional<double> p95_ms;  // none without a success in the window
};

// The figures of a step: a finished one (outcome "passed" or "rolled_back")
// or the one in progress (outcome empty).
struct RolloutStepFigures {
  size_t step = 0;  // 0-based index into RolloutConfig::steps
  int weight = 0;   // percent to the candidate during the step
  double seconds = 0;  // how long it ran (so far)
  WindowFigures candidate;
  WindowFigures stable;
  std::string outcome;
};

struct RolloutTransition {
  RolloutEvent event;
  std::string detail;  // for the log line
};

// `later` minus `earlier`: counts, error rate and p95 (estimated within its
// histogram bucket by linear interpolation, as Prometheus'
// histogram_quantile; above the last bound: the last bound).
WindowFigures WindowBetween(const VersionCounters& earlier, const VersionCounters& later);

class RolloutController {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts at step 0 (the config's first weight), state progressing.
  RolloutController(RolloutConfig config, Clock::time_point now, VersionCounters candidate, VersionCounters stable);

  // Brings the rollout to `now`; returns the transition that happened, if
  // any (at most one per call). Nothing changes once promoted or rolled back.
  std::optional<RolloutTransition> Update(Clock::time_point now, const VersionCounters& candidate,
                                          const VersionCounters& stable);

  int weight() const { return weight_; }  // percent of unversioned traffic to the candidate
  RolloutState state() const { return state_; }
  size_t step() const { return step_; }  // == config().steps.size() once promoted
  const std::string& reason() const { return reason_; }
  const RolloutConfig& config() const { return config_; }
  const std::vector<RolloutStepFigures>& finished_steps() const { return finished_; }
  // The step in progress, figures so far; nullopt once promoted or rolled back.
  std::optional<RolloutStepFigures> Current(Clock::time_point now, const VersionCounters& candidate,
                                            const VersionCounters& stable) const;

 private:
  RolloutStepFigures Figures(Clock::time_point now, const VersionCounters& candidate,
                             const VersionCounters& stable) const;
  std::optional<std::string> Breach(const RolloutStepFigures& f) const;

  RolloutConfig config_;
  size_t step_ = 0;
  int weight_ = 0;
  RolloutState state_ = RolloutState::kProgressing;
  std::string reason_;
  Clock::time_point step_start_;
  VersionCounters candidate_base_;
  VersionCounters stable_base_;
  std::vector<RolloutStepFigures> finished_;
};

}  // namespace ortserve

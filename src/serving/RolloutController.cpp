#include "serving/RolloutController.h"

#include <cmath>
#include <sstream>

namespace ortserve {
namespace {

uint64_t Minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

// Counters can go down only when a version was reloaded (fresh statistics);
// the VersionRollout restarts then, so saturating is enough here.
std::optional<double> P95Ms(const Histogram::Snapshot& earlier, const Histogram::Snapshot& later) {
  const uint64_t total = Minus(later.count, earlier.count);
  if (total == 0) return std::nullopt;
  const uint64_t rank = static_cast<uint64_t>(std::ceil(0.95 * static_cast<double>(total)));
  uint64_t below = 0;
  for (size_t i = 0; i < later.upper_bounds.size(); ++i) {
    const uint64_t base = i < earlier.cumulative.size() ? earlier.cumulative[i] : 0;
    const uint64_t cumulative = Minus(later.cumulative[i], base);
    if (cumulative >= rank) {
      const double lower = i == 0 ? 0.0 : static_cast<double>(later.upper_bounds[i - 1]);
      const double upper = static_cast<double>(later.upper_bounds[i]);
      const double in_bucket = static_cast<double>(cumulative - below);
      const double position = static_cast<double>(rank - below);
      return (lower + (upper - lower) * (in_bucket > 0 ? position / in_bucket : 1.0)) / 1e6;
    }
    below = cumulative;
  }
  return later.upper_bounds.empty() ? 0.0 : static_cast<double>(later.upper_bounds.back()) / 1e6;
}

std::string Number(double v) {
  std::ostringstream out;
  out.precision(4);
  out << v;
  return out.str();
}

std::string StepName(size_t step, int weight) {
  return "step " + std::to_string(step + 1) + " (" + std::to_string(weight) + "%)";
}

}  // namespace

const char* RolloutStateName(RolloutState state) {
  static constexpr const char* kNames[] = {"progressing", "paused", "promoted", "rolled_back"};
  return kNames[static_cast<size_t>(state)];
}

const char* RolloutEventName(RolloutEvent event) {
  static constexpr const char* kNames[kRolloutEventCount] = {"started", "advanced", "paused", "promoted",
                                                             "rolled_back"};
  return kNames[static_cast<size_t>(event)];
}

WindowFigures WindowBetween(const VersionCounters& earlier, const VersionCounters& later) {
  WindowFigures f;
  f.errors = Minus(later.errors, earlier.errors);
  f.requests = Minus(later.successes, earlier.successes) + f.errors;
  f.error_rate = f.requests == 0 ? 0.0 : static_cast<double>(f.errors) / static_cast<double>(f.requests);
  f.p95_ms = P95Ms(earlier.durations, later.durations);
  return f;
}

RolloutController::RolloutController(RolloutConfig config, Clock::time_point now, VersionCounters candidate,
                                     VersionCounters stable)
    : config_(std::move(config)),
      weight_(config_.steps.front()),
      step_start_(now),
      candidate_base_(std::move(candidate)),
      stable_base_(std::move(stable)) {}

RolloutStepFigures RolloutController::Figures(Clock::time_point now, const VersionCounters& candidate,
                                              const VersionCounters& stable) const {
  RolloutStepFigures f;
  f.step = step_;
  f.weight = weight_;
  f.seconds = std::chrono::duration<double>(now - step_start_).count();
  f.candidate = WindowBetween(candidate_base_, candidate);
  f.stable = WindowBetween(stable_base_, stable);
  return f;
}

std::optional<RolloutStepFigures> RolloutController::Current(Clock::time_point now, const VersionCounters& candidate,
                                                             const VersionCounters& stable) const {
  if (state_ == RolloutState::kPromoted || state_ == RolloutState::kRolledBack) return std::nullopt;
  return Figures(now, candidate, stable);
}

std::optional<std::string> RolloutController::Breach(const RolloutStepFigures& f) const {
  const std::string where = " in " + StepName(f.step, f.weight);
  const WindowFigures& c = f.candidate;
  if (config_.max_error_rate && c.error_rate > *config_.max_error_rate) {
    return "error rate " + Number(c.error_rate) + " (" + std::to_string(c.errors) + " of " +
           std::to_string(c.requests) + " requests) over " + kRolloutMaxErrorRateParameter + " " +
           Number(*config_.max_error_rate) + where;
  }
  if (config_.max_p95_ms && c.p95_ms && *c.p95_ms > *config_.max_p95_ms) {
    return "p95 " + Number(*c.p95_ms) + " ms over " + kRolloutMaxP95MsParameter + " " +
           Number(*config_.max_p95_ms) + where;
  }
  if (config_.max_p95_ratio && c.p95_ms && f.stable.p95_ms && *f.stable.p95_ms > 0) {
    const double ratio = *c.p95_ms / *f.stable.p95_ms;
    if (ratio > *config_.max_p95_ratio) {
      return "p95 ratio " + Number(ratio) + " (candidate " + Number(*c.p95_ms) + " ms, stable " +
             Number(*f.stable.p95_ms) + " ms) over " + kRolloutMaxP95RatioParameter + " " +
             Number(*config_.max_p95_ratio) + where;
    }
  }
  return std::nullopt;
}

std::optional<RolloutTransition> RolloutController::Update(Clock::time_point now, const VersionCounters& candidate,
                                                           const VersionCounters& stable) {
  if (state_ == RolloutState::kPromoted || state_ == RolloutState::kRolledBack) return std::nullopt;
  RolloutStepFigures f = Figures(now, candidate, stable);
  const bool enough = f.candidate.requests >= config_.min_requests;
  if (enough) {
    if (auto breach = Breach(f)) {
      state_ = RolloutState::kRolledBack;
      weight_ = 0;
      reason_ = *breach;
      f.outcome = "rolled_back";
      finished_.push_back(std::move(f));
      return RolloutTransition{RolloutEvent::kRolledBack, reason_};
    }
  }
  if (f.seconds < config_.step_seconds[step_]) return std::nullopt;
  if (!enough) {
    if (state_ == RolloutState::kPaused) return std::nullopt;
    state_ = RolloutState::kPaused;
    reason_ = StepName(step_, weight_) + " waits for traffic: the candidate served " +
              std::to_string(f.candidate.requests) + " of the " + std::to_string(config_.min_requests) +
              " requests (" + kRolloutMinRequestsParameter + ") a step needs";
    return RolloutTransition{RolloutEvent::kPaused, reason_};
  }
  const std::string passed = StepName(step_, weight_);
  f.outcome = "passed";
  finished_.push_back(std::move(f));
  ++step_;
  step_start_ = now;
  candidate_base_ = candidate;
  stable_base_ = stable;
  if (step_ == config_.steps.size()) {
    state_ = RolloutState::kPromoted;
    weight_ = 100;
    reason_ = "passed every step";
    return RolloutTransition{RolloutEvent::kPromoted, passed + " passed; the candidate takes 100%"};
  }
  state_ = RolloutState::kProgressing;
  reason_.clear();
  weight_ = config_.steps[step_];
  return RolloutTransition{RolloutEvent::kAdvanced, passed + " passed; now " + StepName(step_, weight_)};
}

}  // namespace ortserve

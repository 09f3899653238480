#pragma once
// Which version answers a request that names none, when the config splits
// traffic by `version_weights` (config/VersionWeights.h).
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "config/VersionWeights.h"
#include "core/Mutex.h"

namespace ortserve {

// Smooth weighted round-robin (as nginx): deterministic, and over any run of
// sum(weights) picks among a fixed eligible set each version is picked exactly
// `weight` times, interleaved rather than in bursts. Thread-safe.
class WeightedVersionPicker {
 public:
  explicit WeightedVersionPicker(std::vector<VersionWeight> weights)
      : weights_(std::move(weights)), current_(weights_.size(), 0) {}

  // Picks among the weighted versions for which `eligible(version)` is true
  // (e.g. READY); nullopt when none is.
  template <typename Eligible>
  std::optional<int64_t> Pick(Eligible&& eligible) {
    MutexLock lock(mu_);
    int64_t total = 0;
    int best = -1;
    for (size_t i = 0; i < weights_.size(); ++i) {
      if (weights_[i].weight <= 0 || !eligible(weights_[i].version)) continue;
      current_[i] += weights_[i].weight;
      total += weights_[i].weight;
      if (best < 0 || current_[i] > current_[best]) best = static_cast<int>(i);
    }
    if (best < 0) return std::nullopt;
    current_[best] -= total;
    return weights_[best].version;
  }

  const std::vector<VersionWeight>& weights() const { return weights_; }

 private:
  Mutex mu_;
  const std::vector<VersionWeight> weights_;
  std::vector<int64_t> current_ ORTSERVE_GUARDED_BY(mu_);
};

}  // namespace ortserve

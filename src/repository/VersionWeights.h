#pragma once
// Canary traffic split: the model config parameter
//   parameters { key: "version_weights" value { string_value: "1:90,2:10" } }
// spreads requests that name no version over the listed versions in
// proportion to their weights (docs/model-config.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/Mutex.h"
#include "core/Status.h"

namespace ortserve {

inline constexpr const char* kVersionWeightsParameter = "version_weights";

struct VersionWeight {
  int64_t version = 0;  // > 0
  int64_t weight = 0;   // >= 0; 0 takes the version out of the split
};

// "1:90,2:10" (spaces allowed around items) -> {{1,90},{2,10}}. kInvalidArgument
// names the bad item; a version listed twice or no positive weight is an error.
Result<std::vector<VersionWeight>> ParseVersionWeights(const std::string& text);

// Smooth weighted round-robin (as nginx): deterministic, and over any run of
// sum(weights) picks among a fixed eligible set each version is picked exactly
// `weight` times, interleaved rather than in bursts. Thread-safe.
class WeightedVersionPicker {
 public:
  explicit WeightedVersionPicker(std::vector<VersionWeight> weights);

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

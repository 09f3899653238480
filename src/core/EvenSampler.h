#pragma once
// Deterministic, evenly spread sampling of a stream: item n (counted from 0)
// is taken when floor(n * fraction) advances, so of any n consecutive items
// floor(n * fraction) or one more are taken, with no lock or random number
// (one atomic add). The shadow comparison's requests and the access log's
// lines are sampled so. (The drift statistics sample with DriftSampler
// instead, serving/InputDrift.h: golden-ratio steps per shard, which traffic
// with a period cannot alias with.)
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

namespace ortserve {

class EvenSampler {
 public:
  // `fraction` is clamped to [0, 1].
  explicit EvenSampler(double fraction) : fraction_(std::clamp(fraction, 0.0, 1.0)) {}
  // Whether the next item is taken. Thread-safe.
  bool Take() { return Takes(count_.fetch_add(1, std::memory_order_relaxed), fraction_); }
  // Whether item n (from 0) is taken at `fraction`.
  static bool Takes(uint64_t n, double fraction) {
    if (fraction >= 1.0) return true;
    if (fraction <= 0.0) return false;
    return std::floor(static_cast<double>(n + 1) * fraction) > std::floor(static_cast<double>(n) * fraction);
  }

 private:
  const double fraction_;
  std::atomic<uint64_t> count_{0};
};

}  // namespace ortserve

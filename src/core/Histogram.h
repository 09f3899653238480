#pragma once
// A fixed-bucket histogram for the request path: Observe() is two relaxed
// atomic adds and a search over at most kMaxBuckets bounds, with no lock and
// no allocation. Values are integers in the caller's unit (nanoseconds for
// durations, items for batch sizes); the metrics endpoint scales them when it
// renders (Prometheus wants seconds).
//
// Buckets hold per-bucket (not cumulative) counts so that an observation
// touches one bucket; Snapshot() accumulates. A snapshot taken while other
// threads observe is not an atomic cut: its sum may be a few observations
// ahead of or behind its counts (the count itself is always the sum of the
// buckets, so _count and the +Inf bucket agree, as Prometheus requires).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace ortserve {

class Histogram {
 public:
  static constexpr size_t kMaxBuckets = 24;  // finite upper bounds; +Inf comes on top

  // `upper_bounds` strictly increasing, at most kMaxBuckets (extra ones are
  // dropped); a value v lands in the first bucket whose bound is >= v.
  explicit Histogram(std::initializer_list<uint64_t> upper_bounds) {
    for (uint64_t b : upper_bounds) {
      if (size_ == kMaxBuckets || (size_ > 0 && b <= bounds_[size_ - 1])) break;
      bounds_[size_++] = b;
    }
  }
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(uint64_t value) {
    const uint64_t* begin = bounds_.data();
    const size_t bucket = static_cast<size_t>(std::lower_bound(begin, begin + size_, value) - begin);
    counts_[bucket].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(value, std::memory_order_relaxed);
  }

  struct Snapshot {
    std::vector<uint64_t> upper_bounds;  // finite bounds, in the observed unit
    std::vector<uint64_t> cumulative;    // cumulative[i]: observations <= upper_bounds[i]
    uint64_t count = 0;                  // all observations (the +Inf bucket)
    uint64_t sum = 0;                    // in the observed unit
  };
  Snapshot Read() const {
    Snapshot s;
    s.upper_bounds.assign(bounds_.begin(), bounds_.begin() + static_cast<std::ptrdiff_t>(size_));
    s.cumulative.reserve(size_);
    uint64_t running = 0;
    for (size_t i = 0; i < size_; ++i) {
      running += counts_[i].load(std::memory_order_relaxed);
      s.cumulative.push_back(running);
    }
    s.count = running + counts_[size_].load(std::memory_order_relaxed);
    s.sum = sum_.load(std::memory_order_relaxed);
    return s;
  }

  size_t bucket_count() const { return size_; }

  // Durations in nanoseconds, 50 µs .. 10 s (rendered in seconds).
  static Histogram Durations() {
    return Histogram{50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000,
                     10'000'000, 25'000'000, 50'000'000, 100'000'000, 250'000'000, 500'000'000,
                     1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
  }
  // Batch sizes: powers of two, 1 .. 1024.
  static Histogram BatchSizes() { return Histogram{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}; }

 private:
  std::array<uint64_t, kMaxBuckets> bounds_{};
  size_t size_ = 0;
  std::array<std::atomic<uint64_t>, kMaxBuckets + 1> counts_{};  // [size_]: above every bound
  std::atomic<uint64_t> sum_{0};
};

}  // namespace ortserve

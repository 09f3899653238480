#pragma once
// Per model version counters, exactly the quantities of Triton's statistics
// extension. Updated with relaxed atomics on the request path (no locks), read
// by the statistics and metrics endpoints.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace ortserve {

struct DurationStat {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> ns{0};
  void Add(uint64_t duration_ns, uint64_t n = 1) {
    count.fetch_add(n, std::memory_order_relaxed);
    ns.fetch_add(duration_ns, std::memory_order_relaxed);
  }
};

struct BatchStat {
  DurationStat compute_input;
  DurationStat compute_infer;
  DurationStat compute_output;
};

class ModelStatistics {
 public:
  // Batch sizes 1..max_batch_size are tracked (index 0 unused; models without
  // batching use index 1).
  explicit ModelStatistics(int max_batch_size)
      : batch_stats_(static_cast<size_t>(max_batch_size < 1 ? 1 : max_batch_size) + 1) {}

  std::atomic<uint64_t> last_inference_ms{0};  // ms since epoch
  std::atomic<uint64_t> inference_count{0};    // inferences (batch elements)
  std::atomic<uint64_t> execution_count{0};    // model executions

  DurationStat success;         // end to end inside the server
  DurationStat fail;
  DurationStat queue;
  DurationStat compute_input;
  DurationStat compute_infer;
  DurationStat compute_output;
  DurationStat cache_hit;       // always zero: no response cache
  DurationStat cache_miss;

  // Per executed batch size; null for sizes above the tracked maximum.
  BatchStat* ForBatchSize(size_t batch_size) {
    return batch_size < batch_stats_.size() ? &batch_stats_[batch_size] : nullptr;
  }
  size_t MaxTrackedBatchSize() const { return batch_stats_.size() - 1; }
  const BatchStat& BatchStatAt(size_t batch_size) const { return batch_stats_[batch_size]; }

 private:
  std::vector<BatchStat> batch_stats_;
};

}  // namespace ortserve

#pragma once
// Per model version counters, exactly the quantities of Triton's statistics
// extension. Updated with relaxed atomics on the request path (no locks), read
// by the statistics and metrics endpoints.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/Histogram.h"
#include "core/Status.h"

namespace ortserve {

// How a request that reached a model ended (the metrics endpoint's
// ortserve_requests_total{outcome=...}).
enum class RequestOutcome {
  kSuccess,
  kInvalidInput,  // failed validation against the model (400)
  kRejected,      // queue full, model not ready, shutting down (503)
  kTimeout,       // its timeout expired in the queue, or during a run that was then terminated
  kCancelled,     // the client went away (before it ran, or its run was terminated)
  kInternal,      // the run itself failed
};
inline constexpr size_t kRequestOutcomeCount = 6;
// "success", "invalid_input", "rejected", "timeout", "cancelled", "internal".
inline const char* RequestOutcomeName(RequestOutcome outcome) {
  static constexpr const char* kNames[kRequestOutcomeCount] = {
      "success", "invalid_input", "rejected", "timeout", "cancelled", "internal"};
  return kNames[static_cast<size_t>(outcome)];
}
// The outcome a failure status stands for when nothing more specific is known
// (the scheduler knows a queue timeout from a full queue; a Status does not).
inline RequestOutcome OutcomeOfFailure(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kUnsupported:
    case StatusCode::kPayloadTooLarge:
      return RequestOutcome::kInvalidInput;
    case StatusCode::kUnavailable:
      return RequestOutcome::kRejected;
    case StatusCode::kDeadlineExceeded:
      return RequestOutcome::kTimeout;
    case StatusCode::kCancelled:
      return RequestOutcome::kCancelled;
    case StatusCode::kOk:
    case StatusCode::kInternal:
      break;
  }
  return RequestOutcome::kInternal;
}

// Why a request to a model was served by its fallback model instead (the
// metrics endpoint's ortserve_fallback_total{reason=...}).
enum class FallbackReason {
  kQueueFull,     // the primary's queue was full
  kExpectedWait,  // the primary's expected wait exceeded the request's timeout
  kRunFailed,     // the primary's run failed (kInternal)
};
inline constexpr size_t kFallbackReasonCount = 3;
// "queue_full", "expected_wait", "run_failed".
inline const char* FallbackReasonName(FallbackReason reason) {
  static constexpr const char* kNames[kFallbackReasonCount] = {"queue_full", "expected_wait",
                                                               "run_failed"};
  return kNames[static_cast<size_t>(reason)];
}

// How a sequence of a sequence-batched model ended (the metrics endpoint's
// ortserve_sequences_ended_total{reason=...}).
enum class SequenceEnd {
  kEndFlag,      // a request with sequence_end was accepted
  kIdleTimeout,  // nothing arrived for max_sequence_idle_microseconds
  kFailed,       // one of its requests failed, timed out or was cancelled
  kRestarted,    // a START arrived while it was running (Triton: it restarts)
  kShutdown,     // still open when the model shut down
};
inline constexpr size_t kSequenceEndCount = 5;
// "end", "idle_timeout", "failed", "restarted", "shutdown".
inline const char* SequenceEndName(SequenceEnd reason) {
  static constexpr const char* kNames[kSequenceEndCount] = {"end", "idle_timeout", "failed", "restarted",
                                                            "shutdown"};
  return kNames[static_cast<size_t>(reason)];
}

// A sequence-batched model's sequences and slots (scheduler/SequenceBatcher.h);
// all zero for other models.
struct SequenceStats {
  std::atomic<uint64_t> slots{0};        // gauge: sequence slots of all instances (fixed at load)
  std::atomic<uint64_t> active{0};       // gauge: sequences holding a slot now
  std::atomic<uint64_t> state_bytes{0};  // gauge: implicit state held in the server now
  std::atomic<uint64_t> started{0};      // counter: sequences started (START accepted)
  std::array<std::atomic<uint64_t>, kSequenceEndCount> ended{};  // counter, by reason
  void CountEnd(SequenceEnd reason) { ended[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed); }
  uint64_t Ended(SequenceEnd reason) const { return ended[static_cast<size_t>(reason)].load(std::memory_order_relaxed); }
};

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

  // ---- Prometheus metrics (the metrics endpoint only; Triton's fields above
  // keep their exact meaning for the statistics extension).
  // Requests by how they ended; their sum is every request the model saw.
  std::array<std::atomic<uint64_t>, kRequestOutcomeCount> outcomes{};
  void CountOutcome(RequestOutcome outcome) {
    outcomes[static_cast<size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
  }
  // Requests of this model handed to its fallback model, by reason. They are
  // not in `outcomes` above unless the primary also failed them (run_failed:
  // counted `internal` here, then answered by the fallback).
  std::array<std::atomic<uint64_t>, kFallbackReasonCount> fallbacks{};
  void CountFallback(FallbackReason reason) {
    fallbacks[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  }
  // Executions stopped in the middle (ModelInstance::Terminate) because every
  // request of the batch had timed out or been cancelled.
  std::atomic<uint64_t> terminated_executions{0};
  // Per successful request, in ns: arrival to responses ready; enqueue to
  // batch start; and its batch's input/infer/output durations.
  Histogram request_duration = Histogram::Durations();
  Histogram queue_duration = Histogram::Durations();
  Histogram compute_input_duration = Histogram::Durations();
  Histogram compute_infer_duration = Histogram::Durations();
  Histogram compute_output_duration = Histogram::Durations();
  // Per successful execution: the rows it ran.
  Histogram batch_size = Histogram::BatchSizes();
  // Sequence batching only: slots, live sequences, implicit state, how they end.
  SequenceStats sequences;
  // Creating the instances, warming up and starting the scheduler, in ns.
  std::atomic<uint64_t> load_duration_ns{0};
  // The last load and the optimized-model cache (--model-cache-dir): 0 off
  // (or a GPU model), 1 miss (built and saved), 2 hit (read from the cache).
  std::atomic<int> load_cache_outcome{0};

  // Per executed batch size; null for sizes above the tracked maximum.
  BatchStat* ForBatchSize(size_t batch_size) {
    return batch_size < batch_stats_.size() ? &batch_stats_[batch_size] : nullptr;
  }
  size_t MaxTrackedBatchSize() const { return batch_stats_.size() - 1; }
  const BatchStat& BatchStatAt(size_t batch_size) const { return batch_stats_[batch_size]; }

 private:
  std::vector<BatchStat> batch_stats_;
};

// The response cache's state (--cache-config local,size=BYTES), for the
// metrics endpoint. Hits and misses of every model together; each model's
// own are in its statistics (cache_hit, cache_miss).
struct ResponseCacheUsage {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t entries = 0;
  uint64_t insertions = 0;
  uint64_t evictions = 0;  // entries dropped to make room (not those of unloaded versions)
  uint64_t hits = 0;
  uint64_t misses = 0;
};

}  // namespace ortserve

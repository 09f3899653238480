#pragma once
// One loaded model version and its request path, each stage in one call:
//   admit     readiness, validation against the config (RequestValidator),
//             input reshape, padding to a shape bucket (ShapeBuckets);
//   drift     with drift_* parameters: the admitted inputs, before padding,
//             are counted (InputDrift), whether or not the cache answers;
//   shadow    with shadow_* parameters, on every version but the shadow one:
//             a sampled request that is admitted and misses the cache runs
//             again on the shadow version once its answer was sent
//             (ShadowComparison);
//   cache     with `response_cache { enable: true }` and a server cache: an
//             answer the cache holds is sent at once (ResponseCache);
//   schedule  the model's Scheduler (the dynamic batcher today), or the
//             fallback model (FallbackRouter) when the request would wait
//             too long or finds the queue full;
//   shape     the scheduler's result cut to what the request asked for
//             (ResponseShaper), stored in the cache when it missed, then the
//             client's on_complete.
// A request refused on the way is answered here, counted once in the
// model's statistics; what the scheduler accepts, it counts.
//
// Lifetime: the loader creates the model, builds its scheduler with the
// model as its RequestCompleter, and Start()s it. Shutdown() (also run by the
// destructor) shuts the scheduler down, so no completion arrives after it;
// the front ends hold a shared_ptr while they hand a request in, and the
// repository holds one while the model is published.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/ModelStatistics.h"
#include "scheduler/Scheduler.h"
#include "serving/FallbackRouter.h"
#include "serving/InputDrift.h"
#include "serving/Model.h"
#include "serving/ResponseCache.h"
#include "serving/ResponseShaper.h"
#include "serving/ShadowComparison.h"
#include "serving/ShapeBuckets.h"

namespace ortserve {

class ServedModel final : public Model, private RequestCompleter {
 public:
  // `instance_outputs`: the outputs the instances produce, in their order.
  // `fallbacks` null: the model has no fallback. `labels`: its outputs'
  // classification labels (null: none). `cache` null: its answers are not
  // cached. `drift` null: no drift statistics. `shadow` null: its requests
  // are not shadowed.
  ServedModel(inference::ModelConfig config, std::string version, std::vector<std::string> instance_outputs,
              std::shared_ptr<const FallbackLookup> fallbacks, std::shared_ptr<const OutputLabels> labels = nullptr,
              std::shared_ptr<ResponseCache> cache = nullptr, std::shared_ptr<InputDrift> drift = nullptr,
              std::shared_ptr<ShadowComparison> shadow = nullptr);
  ~ServedModel() override;

  const std::string& name() const override { return config_->name(); }
  const std::string& version() const override { return version_; }
  const inference::ModelConfig& config() const override { return *config_; }
  ModelStatistics& stats() override { return stats_; }
  bool ready() const override { return Readiness().ok(); }
  // OK when serving; otherwise why not (loading or unloading, or what its
  // scheduler lacks: an ensemble's composing model).
  Status Readiness() const;
  void Infer(std::unique_ptr<InferenceRequest> request) override;
  size_t QueueDepth() const override { return scheduler_ ? scheduler_->QueueDepth() : 0; }
  size_t BusyInstances() const override { return scheduler_ ? scheduler_->BusyInstances() : 0; }
  const InputDrift* drift() const override { return drift_.get(); }
  const ShadowComparison* shadow() const override { return shadow_.get(); }
  // Requests inside this model now: from Infer until their answer goes out (queued,
  // running, or handed to a fallback not yet). Approximate under
  // concurrency; exact once the model stopped taking requests.
  uint64_t InFlight() const { return in_flight_.load(std::memory_order_acquire); }
  // The arrival time of the latest request, in Clock's nanoseconds since its
  // epoch; the time the model started serving before any request came.
  int64_t LastUsedNs() const { return last_used_ns_.load(std::memory_order_relaxed); }
  // Counts as used at `now` (a request on its way to Infer: the repository's
  // on-demand check saw it), so that the memory budget evicts it last.
  void Touch(Clock::time_point now) {
    last_used_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  }

  // What the model's scheduler answers through.
  RequestCompleter* completer() { return this; }
  // Serves from here on (READY).
  void Start(std::unique_ptr<Scheduler> scheduler);
  // Refuses new requests (not ready), shuts the scheduler down
  // (Scheduler::Shutdown) and drops this version's cached answers.
  // Idempotent.
  void Shutdown(Clock::time_point abandon_at = Clock::time_point::max());
  // A request another model handed on (FallbackRouter): served here, never
  // handed on again.
  void InferHandedOn(std::unique_ptr<InferenceRequest> request);
  // A shadow run (ShadowComparison::Submit's contract): false, leaving the
  // request with the caller, when not READY or the queue is full. Admitted
  // as any request but not counted in the drift statistics, never answered
  // from the cache or handed to a fallback; at the lowest priority level
  // when the config has priority levels.
  bool TryShadow(std::unique_ptr<InferenceRequest>& request);

 private:
  void Serve(std::unique_ptr<InferenceRequest> request, bool may_fall_back);
  // Readiness + validation + input reshape + drift statistics (when
  // `observe_drift`) + padding to a shape bucket.
  Status Admit(InferenceRequest& request, bool observe_drift = true) const;
  // Answers an admitted request from the cache when it holds its answer
  // (true: `request` is consumed); otherwise leaves the key in the request.
  bool AnsweredFromCache(std::unique_ptr<InferenceRequest>& request);
  // Stores a computed answer under the key its miss left.
  void StoreInCache(const ResponseCacheKey& key, const InferenceResponse& response);
  void ScheduleWithFallback(std::unique_ptr<InferenceRequest> request, std::shared_ptr<InferenceRequest> kept);
  // A request of Serve is about to be answered or was handed on: no longer
  // in flight here. Called before the answer goes out, so that a client's
  // next request never finds this model still busy with the last one; an
  // eviction that follows still waits for the answer (Shutdown waits for the
  // scheduler's threads; a caller answering on its own thread holds the model).
  void Left() { in_flight_.fetch_sub(1, std::memory_order_acq_rel); }
  // Answers a request this model refused, counted as `outcome`.
  void Refuse(CompletionCallback done, Clock::time_point arrival, Status status, RequestOutcome outcome);
  // RequestCompleter: shapes the response and answers the client.
  void Complete(std::unique_ptr<InferenceRequest> request, Result<InferenceResponse> result) override;

  const std::shared_ptr<const inference::ModelConfig> config_;
  const std::string version_;
  ModelStatistics stats_;  // outlives scheduler_ (declared before it)
  const std::shared_ptr<const ShapeBuckets> buckets_;  // null: the config sets no shape_buckets
  const ResponseShaper shaper_;
  const std::unique_ptr<const FallbackRouter> fallback_;  // null: none
  const std::shared_ptr<ResponseCache> cache_;             // null: answers not cached
  const uint64_t cache_owner_;                             // this version's entries in cache_
  const std::shared_ptr<InputDrift> drift_;                // null: no drift statistics
  const std::shared_ptr<ShadowComparison> shadow_;         // null: requests not shadowed
  std::atomic<ModelState> state_{ModelState::kLoading};
  // Written by every request: on a cache line of their own, away from state_,
  // which every request reads.
  alignas(64) std::atomic<uint64_t> in_flight_{0};
  std::atomic<int64_t> last_used_ns_{0};  // a relaxed store per request, no lock
  alignas(64) std::unique_ptr<Scheduler> scheduler_;  // set once by Start, before READY; read per request
};

}  // namespace ortserve

#include "serving/ServedModel.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "config/ConfigParse.h"
#include "serving/RequestValidator.h"

namespace ortserve {
namespace {

std::unique_ptr<const FallbackRouter> MakeRouter(const inference::ModelConfig* config, ModelStatistics* stats,
                                                 std::shared_ptr<const FallbackLookup> fallbacks) {
  std::string name = FallbackModelName(*config);
  if (name.empty() || !fallbacks) return nullptr;
  return std::make_unique<const FallbackRouter>(config, stats, std::move(name), std::move(fallbacks));
}

// The config's shape buckets; null when it sets none. The loader refused a
// config whose buckets are malformed (ModelPreparation), so none is here.
std::shared_ptr<const ShapeBuckets> BucketsOf(const inference::ModelConfig& config) {
  auto buckets = ShapeBuckets::FromConfig(config);
  if (!buckets.ok() || !buckets.value()) return nullptr;
  return std::make_shared<const ShapeBuckets>(std::move(*buckets.value()));
}

uint64_t NanosSince(Clock::time_point start) {
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
  return static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count()));
}

}  // namespace

ServedModel::ServedModel(inference::ModelConfig config, std::string version,
                         std::vector<std::string> instance_outputs, std::shared_ptr<const FallbackLookup> fallbacks,
                         std::shared_ptr<const OutputLabels> labels, std::shared_ptr<ResponseCache> cache,
                         std::shared_ptr<InputDrift> drift, std::shared_ptr<ShadowComparison> shadow)
    : config_(std::make_shared<const inference::ModelConfig>(std::move(config))),
      version_(std::move(version)),
      stats_(config_->max_batch_size()),
      buckets_(BucketsOf(*config_)),
      shaper_(config_, std::move(instance_outputs), std::move(labels), buckets_),
      fallback_(MakeRouter(config_.get(), &stats_, std::move(fallbacks))),
      cache_(std::move(cache)),
      cache_owner_(cache_ ? ResponseCache::NewOwnerId() : 0),
      drift_(std::move(drift)),
      shadow_(std::move(shadow)) {}

ServedModel::~ServedModel() { Shutdown(); }

void ServedModel::Start(std::unique_ptr<Scheduler> scheduler) {
  scheduler_ = std::move(scheduler);
  last_used_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  state_.store(ModelState::kReady, std::memory_order_release);
}

void ServedModel::Shutdown(Clock::time_point abandon_at) {
  state_.store(ModelState::kUnloading, std::memory_order_release);
  if (scheduler_) scheduler_->Shutdown(abandon_at);
  // After the scheduler: no answer is stored once its entries are gone.
  if (cache_) cache_->DropOwner(cache_owner_);
}

void ServedModel::Infer(std::unique_ptr<InferenceRequest> request) {
  Serve(std::move(request), /*may_fall_back=*/fallback_ != nullptr);
}

void ServedModel::InferHandedOn(std::unique_ptr<InferenceRequest> request) {
  Serve(std::move(request), /*may_fall_back=*/false);
}

Status ServedModel::Readiness() const {
  if (state_.load(std::memory_order_acquire) != ModelState::kReady) {
    return Unavailable("model '" + name() + "' version '" + version_ + "' is not ready");
  }
  if (Status scheduler = scheduler_ ? scheduler_->Readiness() : Status::Ok(); !scheduler.ok()) {
    return Unavailable("model '" + name() + "' version '" + version_ + "' is not ready: " + scheduler.message());
  }
  return Status::Ok();
}

Status ServedModel::Admit(InferenceRequest& request, bool observe_drift) const {
  ORTSERVE_RETURN_IF_ERROR(Readiness());
  ORTSERVE_RETURN_IF_ERROR(ValidateRequest(*config_, request));
  ORTSERVE_RETURN_IF_ERROR(ApplyInputReshape(*config_, &request));
  if (drift_ && observe_drift) drift_->Observe(request);  // the client's values, not the bucket's padding
  return buckets_ ? buckets_->Pad(&request) : Status::Ok();
}

void ServedModel::Serve(std::unique_ptr<InferenceRequest> request, bool may_fall_back) {
  if (!request) return;
  last_used_ns_.store(request->arrival_time.time_since_epoch().count(), std::memory_order_relaxed);
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  // The request as the client sent it, for the fallback: kept before the
  // reshape, and only by a model that has one.
  std::shared_ptr<InferenceRequest> kept = may_fall_back ? FallbackRouter::Keep(*request) : nullptr;
  // Likewise the copy to shadow, when sampled: before the reshape.
  std::shared_ptr<InferenceRequest> shadow_copy = shadow_ ? shadow_->Sample(*request) : nullptr;
  if (Status admitted = Admit(*request); !admitted.ok()) {
    const RequestOutcome outcome = OutcomeOfFailure(admitted);  // invalid_input, or rejected when not ready
    return Refuse(std::move(request->on_complete), request->arrival_time, std::move(admitted), outcome);
  }
  if (cache_ && AnsweredFromCache(request)) return;  // a cached answer is not shadowed
  if (shadow_copy) shadow_->Attach(*request, std::move(shadow_copy));
  if (!kept) return scheduler_->Submit(std::move(request));
  ScheduleWithFallback(std::move(request), std::move(kept));
}

bool ServedModel::TryShadow(std::unique_ptr<InferenceRequest>& request) {
  if (!request || !Readiness().ok()) return false;
  // Counted in flight like a client's request (Complete and Refuse count it
  // out), so the memory budget does not evict a version a shadow run is in.
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  // Behind every client request of this version when it has priority levels.
  request->priority = config_->dynamic_batching().priority_levels();
  if (Status admitted = Admit(*request, /*observe_drift=*/false); !admitted.ok()) {
    const RequestOutcome outcome = OutcomeOfFailure(admitted);
    Refuse(std::move(request->on_complete), request->arrival_time, std::move(admitted), outcome);
    request.reset();
    return true;
  }
  if (scheduler_->TrySubmit(request).ok()) return true;
  Left();  // refused, not answered: the caller drops it
  return false;
}

bool ServedModel::AnsweredFromCache(std::unique_ptr<InferenceRequest>& request) {
  const Clock::time_point start = Clock::now();
  ResponseCacheKey key = ResponseCache::KeyOf(cache_owner_, *request);
  std::optional<std::vector<Tensor>> outputs = cache_->Lookup(key);
  const uint64_t lookup_ns = NanosSince(start);
  if (!outputs) {
    key.lookup_ns = lookup_ns;
    request->cache_key = std::move(key);
    return false;
  }
  InferenceResponse response;
  response.model_name = name();
  response.model_version = version_;
  response.id = request->id;
  response.outputs = std::move(outputs).value();
  ResponseShaper::NameRequested(*request, &response);
  // As Triton counts a hit: a success and a cache hit, no inference or execution.
  const uint64_t request_ns = NanosSince(request->arrival_time);
  stats_.cache_hit.Add(lookup_ns);
  stats_.success.Add(request_ns);
  stats_.request_duration.Observe(request_ns);
  stats_.CountOutcome(RequestOutcome::kSuccess);
  CompletionCallback done = std::move(request->on_complete);
  request.reset();
  Left();
  if (done) done(std::move(response));
  return true;
}

void ServedModel::StoreInCache(const ResponseCacheKey& key, const InferenceResponse& response) {
  const Clock::time_point start = Clock::now();
  cache_->Insert(key, response.outputs);
  // As Triton counts a miss: lookup and insertion, added to the request's time.
  const uint64_t miss_ns = key.lookup_ns + NanosSince(start);
  stats_.cache_miss.Add(miss_ns);
  stats_.success.Add(miss_ns, /*n=*/0);
}

void ServedModel::ScheduleWithFallback(std::unique_ptr<InferenceRequest> request,
                                       std::shared_ptr<InferenceRequest> kept) {
  kept->on_complete = std::move(request->on_complete);
  if (scheduler_->ExpectedToMissDeadline(*request) && fallback_->HandOn(kept, FallbackReason::kExpectedWait)) {
    return Left();
  }
  // A failed run is retried once on the fallback. The callback runs on a
  // worker of this model's scheduler, which this model outlives.
  request->on_complete = [this, kept](Result<InferenceResponse> result) {
    if (!result.ok() && result.status().code() == StatusCode::kInternal &&
        fallback_->HandOn(kept, FallbackReason::kRunFailed)) {
      return;
    }
    if (kept->on_complete) kept->on_complete(std::move(result));
  };
  const Clock::time_point arrival = request->arrival_time;
  Status full = scheduler_->TrySubmit(request);
  if (full.ok()) return;
  if (fallback_->HandOn(kept, FallbackReason::kQueueFull)) return Left();
  // No fallback to take it: answered as the scheduler answers a full queue.
  Refuse(std::move(kept->on_complete), arrival, std::move(full), RequestOutcome::kRejected);
}

void ServedModel::Refuse(CompletionCallback done, Clock::time_point arrival, Status status,
                         RequestOutcome outcome) {
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - arrival);
  stats_.fail.Add(static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count())));
  stats_.CountOutcome(outcome);
  Left();
  if (done) done(std::move(status));
}

void ServedModel::Complete(std::unique_ptr<InferenceRequest> request, Result<InferenceResponse> result) {
  if (result.ok()) {
    if (Status shaped = shaper_.Shape(*request, &result.value()); !shaped.ok()) result = std::move(shaped);
  }
  if (result.ok() && !request->cache_key.empty()) StoreInCache(request->cache_key, result.value());
  CompletionCallback done = std::move(request->on_complete);
  request.reset();  // the inputs are no longer needed: release them before answering
  Left();
  if (done) done(std::move(result));
}

}  // namespace ortserve

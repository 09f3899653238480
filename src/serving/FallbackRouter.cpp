#include "serving/FallbackRouter.h"

#include <spdlog/spdlog.h>

#include "config/ConfigChecks.h"
#include "serving/ServedModel.h"

namespace ortserve {

std::shared_ptr<ServedModel> FallbackLookup::Latest(const std::string& name) const {
  MutexLock lock(mu_);
  return find_ ? find_(name) : nullptr;
}

void FallbackLookup::Detach() {
  MutexLock lock(mu_);
  find_ = nullptr;
}

FallbackRouter::FallbackRouter(const inference::ModelConfig* config, ModelStatistics* stats,
                               std::string fallback_name, std::shared_ptr<const FallbackLookup> lookup)
    : config_(config), stats_(stats), fallback_name_(std::move(fallback_name)), lookup_(std::move(lookup)) {}

std::shared_ptr<InferenceRequest> FallbackRouter::Keep(const InferenceRequest& request) {
  auto kept = std::make_shared<InferenceRequest>();
  kept->model_name = request.model_name;
  kept->id = request.id;
  kept->inputs = request.inputs;
  kept->requested_outputs = request.requested_outputs;
  kept->timeout_us = request.timeout_us;
  kept->priority = request.priority;
  kept->arrival_time = request.arrival_time;
  kept->cancelled = request.cancelled;
  kept->trace = request.trace;  // a fallback answer is traced like the original
  return kept;
}

bool FallbackRouter::HandOn(const std::shared_ptr<InferenceRequest>& kept, FallbackReason reason) const {
  std::shared_ptr<ServedModel> fallback = lookup_ ? lookup_->Latest(fallback_name_) : nullptr;
  if (!fallback || fallback->name() == config_->name()) return false;
  Status compatible = CheckFallbackCompatible(*config_, fallback->config());
  if (!compatible.ok()) {
    spdlog::warn("model '{}': fallback model '{}' is not compatible ({}); not used", config_->name(),
                 fallback_name_, compatible.message());
    return false;
  }
  auto request = std::make_unique<InferenceRequest>(*kept);
  request->model_version.clear();
  request->model_name = fallback_name_;
  if (request->timeout_us != 0) {
    // The client's timeout keeps counting from its arrival.
    const auto elapsed_us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - request->arrival_time).count();
    request->timeout_us = elapsed_us <= 0 ? request->timeout_us
                          : static_cast<uint64_t>(elapsed_us) >= request->timeout_us
                              ? 1
                              : request->timeout_us - static_cast<uint64_t>(elapsed_us);
  }
  request->on_complete = [from = config_->name(), done = std::move(request->on_complete)](
                             Result<InferenceResponse> result) {
    if (result.ok()) result.value().parameters.emplace_back("ortserve_fallback_from", from);
    if (done) done(std::move(result));
  };
  stats_->CountFallback(reason);
  fallback->InferHandedOn(std::move(request));
  return true;
}

}  // namespace ortserve

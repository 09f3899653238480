#pragma once
// Fallback routing (parameter fallback_model, docs/model-config.md): a model
// hands a request to the newest READY version of its fallback model when it
// is expected to miss the request's deadline, when its queue is full, or
// when the request's run failed -- once: the fallback never hands it on.
// The fallback must be compatible (ConfigChecks: CheckFallbackCompatible),
// checked at every hand-off since the fallback may have been reloaded.
#include <functional>
#include <memory>
#include <string>

#include "core/InferenceRequest.h"
#include "core/ModelStatistics.h"
#include "core/Mutex.h"
#include "model_config.pb.h"

namespace ortserve {

class ServedModel;

// How a model finds its fallback at request time: the newest READY version
// of a model, while the repository exists. Shared by the repository and
// every model it loaded (a model may outlive the repository: then it has no
// fallback). Thread-safe.
class FallbackLookup {
 public:
  using Find = std::function<std::shared_ptr<ServedModel>(const std::string& name)>;
  explicit FallbackLookup(Find find) : find_(std::move(find)) {}
  std::shared_ptr<ServedModel> Latest(const std::string& name) const ORTSERVE_EXCLUDES(mu_);
  // The repository is going away: no fallback is found from here on.
  void Detach() ORTSERVE_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  Find find_ ORTSERVE_GUARDED_BY(mu_);
};

// One model's route to its fallback. Thread-safe.
class FallbackRouter {
 public:
  // `config` and `stats` are the primary's and must outlive the router.
  FallbackRouter(const inference::ModelConfig* config, ModelStatistics* stats, std::string fallback_name,
                 std::shared_ptr<const FallbackLookup> lookup);

  // The request as the client sent it (before admission's reshape), to hand
  // on later: inputs are shared, not copied; the client's on_complete is
  // the caller's to move in.
  static std::shared_ptr<InferenceRequest> Keep(const InferenceRequest& request);

  // Hands a copy of `kept` to the fallback, its timeout shortened by the
  // time already spent, its response marked "ortserve_fallback_from"; false
  // (and nothing done) when there is no READY compatible fallback.
  bool HandOn(const std::shared_ptr<InferenceRequest>& kept, FallbackReason reason) const;

 private:
  const inference::ModelConfig* const config_;
  ModelStatistics* const stats_;
  const std::string fallback_name_;
  const std::shared_ptr<const FallbackLookup> lookup_;
};

}  // namespace ortserve

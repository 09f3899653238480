#pragma once
// The loader's second step for one prepared version: create its instances
// (one ORT session each, threads as the plan says), warm every instance up,
// check it against its reference model (reference_*, ReferenceCheck.h), and
// start its scheduler -- a ServedModel ready to publish, or why not.
// Nothing is published here; a failure leaves nothing running.
#include <functional>
#include <memory>
#include <string>

#include "config/EnsembleGraph.h"
#include "core/Status.h"
#include "repository/ModelPreparation.h"
#include "repository/ReferenceCheck.h"
#include "repository/ThreadPlan.h"
#include "scheduler/ComputeSlots.h"
#include "serving/FallbackRouter.h"
#include "serving/ModelLookup.h"
#include "serving/ResponseCache.h"
#include "serving/ServedModel.h"

namespace ortserve {

struct ModelBuildContext {
  // --model-cache-dir ("" = system temp dir): TensorRT caches.
  std::string model_cache_dir;
  // The process's compute-thread budget, leased by every scheduler per run.
  std::shared_ptr<ComputeSlots> compute_slots;
  // How the built model finds its fallback at request time.
  std::shared_ptr<const FallbackLookup> fallbacks;
  // The server's response cache (--cache-config); null: none.
  std::shared_ptr<ResponseCache> response_cache;
  // How an ensemble finds its composing models, at load and request time.
  std::shared_ptr<const ModelLookup> models;
};

// The checks BuildModel makes before it creates any session, for the
// offline check (RepositoryCheck.h) too:
// - a fallback_model must not be the model itself and, when loaded
//   (`fallback_config` not null), must be able to serve its requests; one
//   not loaded yet is only logged;
// - a response cache cannot serve a sequence batching model (Triton's words);
// - an ensemble's steps against the configs of their READY composing models
//   (`ready_config` returns null where the step's model/version is not READY).
Status CheckFallback(const Candidate& c, const inference::ModelConfig* fallback_config);
Status CheckResponseCacheUse(const Candidate& c);
Status CheckEnsembleSteps(const Candidate& c,
                          const std::function<const inference::ModelConfig*(const EnsembleStep&)>& ready_config);

// The sessions part of BuildModel alone, for `ortserve check --load`:
// creates the candidate's instances with `plan`'s threads (no optimized-model
// cache), runs its warm-up on each and its reference check (a model that
// reference_model names found by `find_reference`), then drops them.
// OK for an ensemble (it has no session). The error is BuildModel's.
Status CheckSessions(const Candidate& candidate, const ThreadPlanEntry& plan,
                     const FindReferencedModel& find_reference);

// What `candidate` asks of the thread plan (ThreadPlan.h).
ThreadPlanRequest PlanRequest(const Candidate& candidate);

// Builds `candidate` with `plan`'s threads. An ensemble creates no instance
// (the plan is unused): its steps are checked against its composing models,
// which must be READY, and it is served by an EnsembleScheduler.
Result<std::shared_ptr<ServedModel>> BuildModel(const Candidate& candidate, const ThreadPlanEntry& plan,
                                                const ModelBuildContext& context);

}  // namespace ortserve

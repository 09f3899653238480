#pragma once
// The scheduler of an ensemble (`platform: "ensemble"`): runs each admitted
// request through the steps of its EnsemblePlan. A step is launched as soon
// as every tensor it consumes exists (the steps form a graph, not a list);
// it is a request of its own to the composing model, found at launch time
// (ModelLookup), which admits, batches (with that model's other traffic),
// runs, counts and answers it like any other. Tensors pass between steps by
// sharing their buffers (core/Tensor.h), never copied.
//
// A request that names its outputs runs only the steps they need (as
// Triton). Every step's request carries the ensemble request's id, sequence,
// priority (capped at the composing model's priority_levels), cancellation,
// and what is left of its timeout; a cancelled or expired request launches
// no further step. The first failing step fails the request, with the
// step named: "in ensemble 'E', step 1 (model 'M'): <its error>" (Triton's
// prefix, with the step); steps still running are waited for, none is
// launched after it.
//
// Statistics (Triton's semantics for an ensemble): one success or failure
// per request, its queue time zero, its compute time the sum of its steps'
// compute times, one execution of the request's batch size.
//
// Readiness(): every composing model has a READY version (the one the step
// names, or any); otherwise which does not, in Triton's words.
//
// Thread safety: as Scheduler. Steps are answered on the composing models'
// threads; the ensemble's answer goes out from the thread of its last step.
#include <condition_variable>
#include <map>
#include <set>
#include <vector>
#include <memory>
#include <string>

#include "config/EnsembleGraph.h"
#include "core/ModelStatistics.h"
#include "core/Mutex.h"
#include "scheduler/Scheduler.h"
#include "serving/ModelLookup.h"

namespace ortserve {

class EnsembleScheduler final : public Scheduler {
 public:
  // `stats` and `completer` are the ensemble's and must outlive the
  // scheduler; `version` is the ensemble's, named in its responses.
  EnsembleScheduler(EnsemblePlan plan, std::string version, bool batching, std::shared_ptr<const ModelLookup> models,
                    ModelStatistics* stats, RequestCompleter* completer);
  ~EnsembleScheduler() override;

  void Submit(std::unique_ptr<InferenceRequest> request) override ORTSERVE_EXCLUDES(mu_);
  // Never full: the steps queue at their models.
  Status TrySubmit(std::unique_ptr<InferenceRequest>& request) override;
  bool ExpectedToMissDeadline(const InferenceRequest&) const override { return false; }
  // Refuses new requests and waits until every request accepted is answered.
  // At `abandon_at`, the requests still running fail kUnavailable, launch no
  // further step, and their running steps are cancelled (through the
  // request's cancellation, which every step shares) so that their models
  // stop them.
  void Shutdown(Clock::time_point abandon_at) override ORTSERVE_EXCLUDES(mu_);
  using Scheduler::Shutdown;
  size_t QueueDepth() const override { return 0; }
  size_t BusyInstances() const override { return 0; }
  Status Readiness() const override;

 private:
  struct Run;
  // Per step, whether the outputs asked for (all when none) can do
  // without it (as Triton, a step whose outputs nobody needs never runs).
  std::vector<bool> StepsNotNeeded(const std::vector<RequestedOutput>& requested) const;
  // Launches `steps` of `run`, outside every lock (a step may be answered
  // inside Infer).
  void Launch(const std::shared_ptr<Run>& run, const std::vector<size_t>& steps);
  // Why step `index` of `run` must not start now (cancelled, expired,
  // shutting down, model not ready), or its request.
  Result<std::unique_ptr<InferenceRequest>> StepRequest(const std::shared_ptr<Run>& run, size_t index,
                                                        const Model& model);
  void OnStepDone(const std::shared_ptr<Run>& run, size_t index, Result<InferenceResponse> result);
  // Answers `run` once nothing of it is running: its outputs, or its failure.
  void Finish(const std::shared_ptr<Run>& run);
  void CountSuccess(const Run& run, Clock::time_point arrival, uint64_t compute_ns);

  const EnsemblePlan plan_;
  const std::string version_;
  const bool batching_;
  const std::shared_ptr<const ModelLookup> models_;
  ModelStatistics* const stats_;
  RequestCompleter* const completer_;
  // Per ensemble tensor, the steps consuming it (once per mapping).
  std::map<std::string, std::vector<size_t>> consumers_;
  std::map<std::string, size_t> producers_;  // per ensemble tensor, the step producing it
  std::vector<size_t> input_counts_;         // per step, its mapped inputs

  mutable Mutex mu_;
  std::condition_variable idle_;
  bool stopping_ ORTSERVE_GUARDED_BY(mu_) = false;
  Clock::time_point abandon_at_ ORTSERVE_GUARDED_BY(mu_) = Clock::time_point::max();
  std::set<std::shared_ptr<Run>> runs_ ORTSERVE_GUARDED_BY(mu_);  // accepted and not yet answered
};

}  // namespace ortserve

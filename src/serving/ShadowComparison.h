#pragma once
// Shadow comparison (config/ShadowConfig.h, docs/model-config.md "Shadow
// comparison"): a share of the requests a serving version answers is run
// again on the model's shadow version, and the two answers are compared per
// output. One ShadowComparison per serving version (every version but the
// shadow one).
//
// The real request is never delayed or failed by it: the copy to shadow is
// taken before admission (shared inputs, no copy of their bytes) and handed
// to the shadow version only after the real answer was sent; a shadow run
// that cannot start at once -- `max_in_flight` shadow runs of this version
// already running, the shadow version not READY or its queue full -- is
// dropped and counted. The shadow's answer is only compared, never returned.
//
// Comparison per output (runtime/NumericalComparison.h, shared with the
// reference check at load): the largest absolute difference, the largest
// relative one (where |served| >= 1), and for a floating-point output with a
// class dimension (rank >= 2, last dim > 1) the top-1 agreement of its rows.
// An output mismatches when an element differs by more than
// shadow_tolerance * max(1, |served|), when a row's top-1 class differs, or
// when types, shapes or non-floating values differ.
//
// Thread-safe.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/ShadowConfig.h"
#include "core/EvenSampler.h"
#include "core/Histogram.h"
#include "core/InferenceRequest.h"
#include "core/Mutex.h"
#include "runtime/NumericalComparison.h"

namespace ortserve {

struct ShadowOutputSummary {
  std::string name;
  uint64_t mismatches = 0;
  double max_abs_difference = 0.0;  // over every comparison so far
  double max_rel_difference = 0.0;
  bool has_classes = false;         // top-1 figures apply
  uint64_t top1_agreeing = 0;
  uint64_t top1_rows = 0;
  std::string last_mismatch;        // what the last structural mismatch was; empty: none
  Histogram::Snapshot abs_difference;  // per comparison, in units of kShadowDifferenceScale
};

struct ShadowSummary {
  std::string model;
  std::string version;  // the serving version
  int64_t shadow_version = 0;
  double fraction = 0.0;
  double tolerance = 0.0;
  uint64_t compared = 0;  // shadow runs that answered and were compared
  uint64_t dropped = 0;   // sampled requests whose shadow run could not start
  uint64_t failed = 0;    // shadow runs that answered with an error
  std::string last_failure;
  std::vector<ShadowOutputSummary> outputs;
};

// The histogram of differences counts in units of 1 / kShadowDifferenceScale.
inline constexpr double kShadowDifferenceScale = 1e9;

class ShadowComparison : public std::enable_shared_from_this<ShadowComparison> {
 public:
  // Starts a shadow run: takes the request (true; its on_complete is then
  // called exactly once) or leaves it with the caller, untouched (false:
  // the shadow version is not READY or its queue is full).
  using Submit = std::function<bool(std::unique_ptr<InferenceRequest>& request)>;

  // `outputs`: the model's outputs (the config's), each with its own
  // figures. `max_in_flight` >= 1.
  ShadowComparison(std::string model, std::string version, const ShadowConfig& config,
                   std::vector<std::string> outputs, size_t max_in_flight, Submit submit);

  // Before admission: a copy of `request` to shadow (inputs shared) when the
  // sampler picks it, else null.
  std::shared_ptr<InferenceRequest> Sample(const InferenceRequest& request);
  // After `request` was admitted and not answered from the cache: its
  // answer, when it comes from this version and succeeded, is sent first,
  // then `copy` runs on the shadow version.
  void Attach(InferenceRequest& request, std::shared_ptr<InferenceRequest> copy);
  // Starts `copy` on the shadow version against the served outputs, or drops it.
  void Run(std::shared_ptr<InferenceRequest> copy, std::vector<Tensor> served);
  // Compares one answer (counted in compared and per output).
  void Compare(const std::vector<Tensor>& served, const std::vector<Tensor>& shadow) ORTSERVE_EXCLUDES(mu_);

  ShadowSummary Snapshot() const ORTSERVE_EXCLUDES(mu_);

 private:
  struct OutputFigures {
    explicit OutputFigures(std::string n);
    std::string name;
    Histogram abs_difference;
    uint64_t mismatches = 0;
    OutputTally tally;
    std::string last_mismatch;
  };
  void Finish(const std::vector<Tensor>& served, Result<InferenceResponse> result) ORTSERVE_EXCLUDES(mu_);
  // Compare's figures, without the count.
  void Record(const std::vector<Tensor>& served, const std::vector<Tensor>& shadow) ORTSERVE_EXCLUDES(mu_);
  OutputFigures* FiguresOf(const std::string& output) ORTSERVE_REQUIRES(mu_);

  const std::string model_;
  const std::string version_;
  const ShadowConfig config_;
  const size_t max_in_flight_;
  const Submit submit_;
  EvenSampler sampler_;
  std::atomic<size_t> in_flight_{0};
  std::atomic<uint64_t> compared_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> failed_{0};
  mutable Mutex mu_;
  std::string last_failure_ ORTSERVE_GUARDED_BY(mu_);
  // One per output of the config (fixed at construction), plus any other
  // output an answer named.
  std::vector<std::unique_ptr<OutputFigures>> outputs_ ORTSERVE_GUARDED_BY(mu_);
};

}  // namespace ortserve

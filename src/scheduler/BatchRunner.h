#pragma once
// Runs one batch on one instance: waits for compute slots (the thread
// budget), stacks the requests' inputs along dim 0, runs the instance under
// the run watchdog, splits the outputs back per request in order, and names
// them. One per worker: it keeps the worker's stacking buffers, so it is
// touched by that worker only.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/InferenceRequest.h"
#include "runtime/ModelInstance.h"
#include "scheduler/DynamicBatcherOptions.h"
#include "scheduler/RequestQueue.h"
#include "scheduler/RunWatchdog.h"
#include "scheduler/SchedulerClock.h"
#include "scheduler/TensorStacker.h"

namespace ortserve {

// What became of a batch.
struct BatchRun {
  RunWatchdog::RunEnd ending = RunWatchdog::RunEnd::kRan;
  Status status;  // kRan: OK, or why the batch failed (kInternal)
  // kRan and OK: one per request, in batch order, with every model output.
  std::vector<InferenceResponse> responses;
  uint64_t rows = 0;  // the batch size: dim 0 summed over the requests
  // Start (compute slots held) .. inputs stacked .. run returned .. outputs
  // split and named: Triton's compute_input / _infer / _output.
  Clock::time_point start, input_end, infer_end, end;
};

class BatchRunner {
 public:
  // `index`: the instance's slot in the watchdog. Everything must outlive
  // the runner.
  BatchRunner(size_t index, ModelInstance* instance, const DynamicBatcherOptions* options,
              RunWatchdog* watchdog, SchedulerClock* clock);

  // Runs `batch` (not empty) and fills `run`. Never throws. `held`: compute
  // slots the caller already leased (an inline run); otherwise Run waits for
  // the policy's slots.
  void Run(std::vector<QueuedRequest>& batch, BatchRun* run,
           std::optional<ComputeSlots::Lease> held = std::nullopt);

 private:
  // Stacks, runs and splits: `per_request` gets each request's outputs.
  Status StackRunSplit(std::vector<QueuedRequest>& batch, BatchRun* run,
                       std::vector<std::vector<Tensor>>* per_request);
  void NameResponses(std::vector<QueuedRequest>& batch, std::vector<std::vector<Tensor>>& per_request,
                     BatchRun* run) const;

  const size_t index_;
  ModelInstance* const instance_;
  const DynamicBatcherOptions* const options_;
  const std::string label_;
  RunWatchdog* const watchdog_;
  SchedulerClock* const clock_;
  TensorStacker stacker_;
  std::optional<ComputeSlots::Lease> lease_;  // held from start to infer_end
  std::vector<const InferenceRequest*> requests_;  // scratch, reused per batch
  std::vector<uint64_t> rows_;                     // scratch, reused per batch
};

}  // namespace ortserve

#include "scheduler/BatchRunner.h"

#include <exception>

#include <spdlog/spdlog.h>

#include "core/LogContext.h"

namespace ortserve {

BatchRunner::BatchRunner(size_t index, ModelInstance* instance, const DynamicBatcherOptions* options,
                         RunWatchdog* watchdog, SchedulerClock* clock)
    : index_(index),
      instance_(instance),
      options_(options),
      label_(options->Label()),
      watchdog_(watchdog),
      clock_(clock) {}

void BatchRunner::Run(std::vector<QueuedRequest>& batch, BatchRun* run, std::optional<ComputeSlots::Lease> held) {
  run->ending = RunWatchdog::RunEnd::kRan;
  run->responses.clear();
  // Waiting for compute slots counts as queue time: the batch has not started.
  const ComputePolicy& compute = options_->compute;
  if (held) {
    lease_.emplace(std::move(*held));
  } else if (compute.slots) {
    lease_.emplace(compute.slots->Acquire(compute.slots_per_run));
  }
  run->start = clock_->Now();
  run->input_end = run->infer_end = run->start;
  // Lines logged while the batch runs carry its model and version and, for
  // a batch of one request, that request's id and trace (core/LogContext.h).
  const InferenceRequest& first = *batch.front().request;
  LogContext log_context;
  log_context.model = options_->model_name;
  log_context.version = options_->model_version;
  if (batch.size() == 1) {
    log_context.request_id = first.id;
    if (first.trace) {
      log_context.trace_id = first.trace->trace_id;
      log_context.span_id = first.trace->span_id;
    }
  }
  LogScope log_scope(log_context);
  // As Triton's ONNX Runtime backend at verbose level 1.
  spdlog::debug("{}: executing {} request(s)", label_, batch.size());
  std::vector<std::vector<Tensor>> per_request;
  try {
    run->status = StackRunSplit(batch, run, &per_request);
    if (run->status.ok() && run->ending == RunWatchdog::RunEnd::kRan) NameResponses(batch, per_request, run);
  } catch (const std::exception& e) {
    run->status = Internal(label_ + ": " + e.what());
  } catch (...) {
    run->status = Internal(label_ + ": unknown exception while running a batch");
  }
  lease_.reset();
  run->end = clock_->Now();
}

Status BatchRunner::StackRunSplit(std::vector<QueuedRequest>& batch, BatchRun* run,
                                  std::vector<std::vector<Tensor>>* per_request) {
  requests_.clear();
  rows_.clear();
  run->rows = 0;
  for (const QueuedRequest& entry : batch) {
    requests_.push_back(entry.request.get());
    rows_.push_back(entry.batch_size);
    run->rows += entry.batch_size;
  }
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  const RaggedBatching* ragged = options_->batching.ragged.get();
  Status status = stacker_.Stack(requests_, &inputs, ragged);
  if (status.ok() && ragged) status = AppendBatchInputs(*ragged, requests_, &inputs);
  run->input_end = clock_->Now();
  if (status.ok()) {
    try {
      if (watchdog_->Watch(index_, batch)) status = instance_->Run(inputs, &outputs);
    } catch (...) {
      run->ending = watchdog_->Unwatch(index_);
      throw;
    }
    run->ending = watchdog_->Unwatch(index_);
    if (!status.ok()) status = Internal(status.message());
  }
  run->infer_end = clock_->Now();
  lease_.reset();  // splitting and answering need no compute slot
  inputs.clear();  // lets the stacker reuse its buffers
  if (!status.ok() || run->ending != RunWatchdog::RunEnd::kRan) return status;
  const size_t expected = instance_->OutputNames().size();
  if (outputs.size() != expected) {
    return Internal(label_ + " returned " + std::to_string(outputs.size()) + " outputs, expected " +
                    std::to_string(expected));
  }
  if (batch.size() == 1 && options_->batching.max_batch_size == 0) {
    per_request->push_back(std::move(outputs));  // tensors as the model made them
    return Status::Ok();
  }
  if (ragged && !ragged->batch_outputs.empty()) {
    return SplitRaggedOutputs(*ragged, outputs, instance_->OutputNames(), rows_, requests_, per_request);
  }
  return TensorStacker::Split(outputs, rows_, per_request);
}

void BatchRunner::NameResponses(std::vector<QueuedRequest>& batch,
                                std::vector<std::vector<Tensor>>& per_request, BatchRun* run) const {
  const std::vector<std::string>& names = instance_->OutputNames();
  run->responses.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    InferenceResponse& response = run->responses.emplace_back();
    response.model_name = options_->model_name;
    response.model_version = options_->model_version;
    response.id = batch[i].request->id;
    response.outputs = std::move(per_request[i]);
    for (size_t j = 0; j < response.outputs.size(); ++j) response.outputs[j].name = names[j];
  }
}

}  // namespace ortserve

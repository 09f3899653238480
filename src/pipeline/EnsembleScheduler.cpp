#include "pipeline/EnsembleScheduler.h"

#include <algorithm>
#include <chrono>

namespace ortserve {
namespace {

uint64_t NanosSince(Clock::time_point start) {
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
  return static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count()));
}

uint64_t WallClockMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

uint32_t CappedPriority(uint32_t priority, const inference::ModelConfig& config) {
  const uint64_t levels = config.dynamic_batching().priority_levels();
  if (levels == 0 || priority <= levels) return priority;
  return static_cast<uint32_t>(levels);
}

}  // namespace

// One ensemble request in flight: the tensors produced so far and which
// steps still wait for theirs. `request` is read-only once the run starts
// (its inputs are moved into `tensors`).
struct EnsembleScheduler::Run {
  std::unique_ptr<InferenceRequest> request;
  Clock::time_point deadline = Clock::time_point::max();
  uint64_t rows = 1;  // the request's batch size (1 when the ensemble does not batch)
  std::string id;     // the request's
  CancelFlag cancelled;  // the request's, shared with every step; null: none
  Mutex mu;
  std::map<std::string, Tensor> tensors ORTSERVE_GUARDED_BY(mu);
  std::vector<size_t> missing ORTSERVE_GUARDED_BY(mu);  // per step, inputs not yet produced
  std::vector<bool> launched ORTSERVE_GUARDED_BY(mu);
  size_t in_flight ORTSERVE_GUARDED_BY(mu) = 0;  // steps launched and not yet answered
  Status failure ORTSERVE_GUARDED_BY(mu);        // the first step's failure
  uint64_t compute_ns ORTSERVE_GUARDED_BY(mu) = 0;

  // `tensor` now exists (or, an optional input the client left out, never
  // will): the steps it completes are marked launched and returned.
  std::vector<size_t> Provide(const std::map<std::string, std::vector<size_t>>& consumers,
                              const std::string& tensor) ORTSERVE_REQUIRES(mu) {
    std::vector<size_t> ready;
    auto it = consumers.find(tensor);
    if (it == consumers.end()) return ready;
    for (size_t step : it->second) {
      if (--missing[step] == 0 && !launched[step]) {
        launched[step] = true;
        ready.push_back(step);
      }
    }
    return ready;
  }
};

EnsembleScheduler::EnsembleScheduler(EnsemblePlan plan, std::string version, bool batching,
                                     std::shared_ptr<const ModelLookup> models, ModelStatistics* stats,
                                     RequestCompleter* completer)
    : plan_(std::move(plan)),
      version_(std::move(version)),
      batching_(batching),
      models_(std::move(models)),
      stats_(stats),
      completer_(completer) {
  for (const EnsembleStep& step : plan_.steps) {
    for (const auto& [model_input, tensor] : step.inputs) consumers_[tensor].push_back(step.index);
    for (const auto& [model_output, tensor] : step.outputs) producers_[tensor] = step.index;
    input_counts_.push_back(step.inputs.size());
  }
}

std::vector<bool> EnsembleScheduler::StepsNotNeeded(const std::vector<RequestedOutput>& requested) const {
  if (requested.empty()) return std::vector<bool>(plan_.steps.size(), false);
  std::vector<bool> not_needed(plan_.steps.size(), true);
  std::vector<std::string> tensors;
  for (const RequestedOutput& output : requested) tensors.push_back(output.name);
  while (!tensors.empty()) {
    auto producer = producers_.find(tensors.back());
    tensors.pop_back();
    if (producer == producers_.end() || !not_needed[producer->second]) continue;
    not_needed[producer->second] = false;
    for (const auto& [model_input, tensor] : plan_.steps[producer->second].inputs) tensors.push_back(tensor);
  }
  return not_needed;
}

EnsembleScheduler::~EnsembleScheduler() { Shutdown(); }

Status EnsembleScheduler::TrySubmit(std::unique_ptr<InferenceRequest>& request) {
  Submit(std::move(request));
  return Status::Ok();
}

void EnsembleScheduler::Submit(std::unique_ptr<InferenceRequest> request) {
  auto run = std::make_shared<Run>();
  bool refused = false;
  {
    MutexLock lock(mu_);
    refused = stopping_;
    if (!refused) runs_.insert(run);
  }
  if (refused) {
    stats_->fail.Add(NanosSince(request->arrival_time));
    stats_->CountOutcome(RequestOutcome::kRejected);
    return completer_->Complete(std::move(request), Unavailable("ensemble '" + plan_.name + "' is shutting down"));
  }
  if (request->timeout_us > 0) {
    run->deadline = request->arrival_time + std::chrono::microseconds(request->timeout_us);
  }
  if (batching_ && !request->inputs.empty() && !request->inputs.front().shape.empty()) {
    run->rows = static_cast<uint64_t>(std::max<int64_t>(1, request->inputs.front().shape.front()));
  }
  run->cancelled = request->cancelled;
  run->id = request->id;
  std::vector<size_t> ready;
  {
    MutexLock lock(run->mu);
    for (Tensor& input : request->inputs) run->tensors[input.name] = std::move(input);
    request->inputs.clear();
    run->request = std::move(request);
    run->missing = input_counts_;
    run->launched = StepsNotNeeded(run->request->requested_outputs);
    for (const std::string& input : plan_.inputs) {
      std::vector<size_t> steps = run->Provide(consumers_, input);
      ready.insert(ready.end(), steps.begin(), steps.end());
    }
    run->in_flight = ready.size();
  }
  if (ready.empty()) return Finish(run);
  Launch(run, ready);
}

void EnsembleScheduler::Launch(const std::shared_ptr<Run>& run, const std::vector<size_t>& steps) {
  for (size_t index : steps) {
    const EnsembleStep& step = plan_.steps[index];
    std::shared_ptr<Model> model = models_->Ready(step.model_name, step.model_version);
    if (!model || !model->ready()) {
      OnStepDone(run, index, EnsembleDependencyError(plan_.name, step));
      continue;
    }
    auto sub = StepRequest(run, index, *model);
    if (!sub.ok()) {
      OnStepDone(run, index, sub.status());
      continue;
    }
    // The step is answered through OnStepDone (maybe inside Infer). The
    // model is not held beyond the call: its last reference must never be
    // dropped on one of its own threads.
    model->Infer(std::move(sub).value());
  }
}

Result<std::unique_ptr<InferenceRequest>> EnsembleScheduler::StepRequest(const std::shared_ptr<Run>& run,
                                                                         size_t index, const Model& model) {
  const InferenceRequest& request = *run->request;
  const EnsembleStep& step = plan_.steps[index];
  const std::string what = "request '" + request.id + "' for ensemble '" + plan_.name + "'";
  if (request.cancelled && request.cancelled->IsCancelled()) {
    return Status(StatusCode::kCancelled, what + " was cancelled before this step started");
  }
  const Clock::time_point now = Clock::now();
  if (now >= run->deadline) return Unavailable("Request timeout expired (" + what + ") before this step started");
  {
    MutexLock lock(mu_);
    if (now >= abandon_at_) return Unavailable("ensemble '" + plan_.name + "' is shutting down: step not started");
  }
  auto sub = std::make_unique<InferenceRequest>();
  sub->model_name = step.model_name;
  sub->model_version = step.model_version > 0 ? std::to_string(step.model_version) : "";
  sub->id = request.id;
  sub->priority = CappedPriority(request.priority, model.config());
  sub->sequence = request.sequence;
  sub->cancelled = request.cancelled;
  if (run->deadline != Clock::time_point::max()) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(run->deadline - now).count();
    sub->timeout_us = static_cast<uint64_t>(std::max<int64_t>(1, left));
  }
  for (const auto& [model_output, tensor] : step.outputs) sub->requested_outputs.push_back({model_output});
  {
    MutexLock lock(run->mu);
    if (!run->failure.ok()) return run->failure;  // not launched: an earlier step failed
    for (const auto& [model_input, tensor] : step.inputs) {
      auto found = run->tensors.find(tensor);
      if (found == run->tensors.end()) continue;  // an optional input the client left out
      Tensor input = found->second;               // shares the buffer
      input.name = model_input;
      sub->inputs.push_back(std::move(input));
    }
  }
  sub->on_complete = [this, run, index](Result<InferenceResponse> result) {
    OnStepDone(run, index, std::move(result));
  };
  return sub;
}

void EnsembleScheduler::OnStepDone(const std::shared_ptr<Run>& run, size_t index, Result<InferenceResponse> result) {
  const EnsembleStep& step = plan_.steps[index];
  std::vector<size_t> next;
  bool finished = false;
  {
    MutexLock lock(run->mu);
    --run->in_flight;
    if (!result.ok() && run->failure.ok()) {
      run->failure = Status(result.status().code(), "in ensemble '" + plan_.name + "', " +
                                                        StepLabel(index, step.model_name) + ": " +
                                                        result.status().message());
    }
    if (result.ok() && run->failure.ok()) {
      InferenceResponse& response = result.value();
      run->compute_ns += response.compute_ns;
      for (Tensor& output : response.outputs) {
        auto mapped = std::find_if(step.outputs.begin(), step.outputs.end(),
                                   [&](const auto& o) { return o.first == output.name; });
        if (mapped == step.outputs.end()) continue;
        output.name = mapped->second;
        run->tensors[mapped->second] = std::move(output);
        std::vector<size_t> steps = run->Provide(consumers_, mapped->second);
        next.insert(next.end(), steps.begin(), steps.end());
      }
      run->in_flight += next.size();
    }
    finished = run->in_flight == 0;
  }
  if (!next.empty()) Launch(run, next);
  if (finished) Finish(run);
}

void EnsembleScheduler::Finish(const std::shared_ptr<Run>& run) {
  Status failure;
  InferenceResponse response;
  uint64_t compute_ns = 0;
  {
    MutexLock lock(run->mu);
    failure = run->failure;
    compute_ns = run->compute_ns;
    const auto& requested = run->request->requested_outputs;
    for (const std::string& name : plan_.outputs) {
      auto found = run->tensors.find(name);
      const bool wanted = requested.empty() || std::any_of(requested.begin(), requested.end(),
                                                           [&](const RequestedOutput& r) { return r.name == name; });
      if (!wanted) {
        response.outputs.push_back(Tensor{name, DataType::kInvalid, {}, {}});  // not computed; the shaper drops it
        continue;
      }
      if (found == run->tensors.end()) {
        if (failure.ok()) {
          failure = Unavailable("in ensemble '" + plan_.name +
                                "', unexpected deadlock, at least one output is not set while no more ensemble "
                                "steps can be made (output '" + name + "')");
        }
        break;
      }
      response.outputs.push_back(std::move(found->second));
    }
    run->tensors.clear();  // the intermediate tensors are released before answering
  }
  std::unique_ptr<InferenceRequest> request = std::move(run->request);
  if (failure.ok()) {
    CountSuccess(*run, request->arrival_time, compute_ns);
    response.model_name = plan_.name;
    response.model_version = version_;
    response.id = request->id;
    response.compute_ns = compute_ns;
    response.batch_size = run->rows;
    completer_->Complete(std::move(request), std::move(response));
  } else {
    stats_->fail.Add(NanosSince(request->arrival_time));
    // A step refused or stopped once the request's timeout had passed: the
    // request timed out (a Status alone would read as a rejection).
    const bool expired = failure.code() == StatusCode::kUnavailable && Clock::now() >= run->deadline;
    stats_->CountOutcome(expired ? RequestOutcome::kTimeout : OutcomeOfFailure(failure));
    completer_->Complete(std::move(request), std::move(failure));
  }
  MutexLock lock(mu_);
  runs_.erase(run);
  idle_.notify_all();
}

void EnsembleScheduler::CountSuccess(const Run& run, Clock::time_point arrival, uint64_t compute_ns) {
  const uint64_t request_ns = NanosSince(arrival);
  stats_->success.Add(request_ns);
  stats_->request_duration.Observe(request_ns);
  // As Triton's ensemble: no queue, its steps' compute time as its own, one
  // execution of the request's batch size.
  if (BatchStat* per_size = stats_->ForBatchSize(run.rows)) per_size->compute_infer.Add(compute_ns);
  stats_->inference_count.fetch_add(run.rows, std::memory_order_relaxed);
  stats_->execution_count.fetch_add(1, std::memory_order_relaxed);
  stats_->last_inference_ms.store(WallClockMs(), std::memory_order_relaxed);
  stats_->batch_size.Observe(run.rows);
  stats_->queue.Add(0);
  stats_->compute_input.Add(0);
  stats_->compute_infer.Add(compute_ns);
  stats_->compute_output.Add(0);
  stats_->queue_duration.Observe(0);
  stats_->compute_infer_duration.Observe(compute_ns);
  stats_->CountOutcome(RequestOutcome::kSuccess);
}

void EnsembleScheduler::Shutdown(Clock::time_point abandon_at) {
  std::vector<std::shared_ptr<Run>> left;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    abandon_at_ = std::min(abandon_at_, abandon_at);
    const auto idle = [this]() ORTSERVE_REQUIRES(mu_) { return runs_.empty(); };
    if (abandon_at_ == Clock::time_point::max()) return lock.Wait(idle_, idle);
    if (idle_.wait_until(lock.native(), abandon_at_, idle)) return;
    left.assign(runs_.begin(), runs_.end());
  }
  // At the exit timeout: each request still running fails as abandoned, and
  // its running steps are cancelled so that their models stop them now.
  for (const std::shared_ptr<Run>& run : left) {
    {
      MutexLock lock(run->mu);
      if (run->failure.ok()) {
        run->failure = Unavailable("ensemble '" + plan_.name + "' is shutting down: request '" + run->id +
                                   "' was not finished before the exit timeout");
      }
    }
    if (run->cancelled) run->cancelled->Cancel();
  }
  MutexLock lock(mu_);
  lock.Wait(idle_, [this]() ORTSERVE_REQUIRES(mu_) { return runs_.empty(); });
}

Status EnsembleScheduler::Readiness() const {
  for (const EnsembleStep& step : plan_.steps) {
    std::shared_ptr<Model> model = models_->Ready(step.model_name, step.model_version);
    if (!model || !model->ready()) return EnsembleDependencyError(plan_.name, step);
  }
  return Status::Ok();
}

}  // namespace ortserve

#include "scheduler/RequestAnswerer.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "scheduler/BatchTracing.h"

namespace ortserve {
namespace {

uint64_t WallClockMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

uint64_t Nanos(Clock::time_point from, Clock::time_point to) {
  if (to <= from) return 0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count());
}

RequestAnswerer::RequestAnswerer(std::string label, ModelStatistics* stats, RequestCompleter* completer,
                                 SchedulerClock* clock)
    : label_(std::move(label)), stats_(stats), completer_(completer), clock_(clock) {}

void RequestAnswerer::Fail(std::unique_ptr<InferenceRequest> request, Status status,
                           RequestOutcome outcome) const {
  stats_->fail.Add(Nanos(request->arrival_time, clock_->Now()));
  stats_->CountOutcome(outcome);
  completer_->Complete(std::move(request), std::move(status));
}

void RequestAnswerer::Reject(std::vector<RejectedRequest>& rejected) const {
  for (RejectedRequest& r : rejected) {
    // The queue rejects only cancelled requests and expired timeouts.
    const RequestOutcome outcome =
        r.status.code() == StatusCode::kCancelled ? RequestOutcome::kCancelled : RequestOutcome::kTimeout;
    Fail(std::move(r.request), std::move(r.status), outcome);
  }
}

void RequestAnswerer::Answer(std::vector<QueuedRequest>& batch, BatchRun& run) const {
  if (run.ending != RunWatchdog::RunEnd::kRan) {
    // Whatever Run returned (if it started): every request was dead when it
    // was stopped, or shutdown's deadline had passed.
    stats_->terminated_executions.fetch_add(1, std::memory_order_relaxed);
    return AnswerStopped(batch, run.ending);
  }
  if (!run.status.ok()) {
    for (QueuedRequest& entry : batch) Fail(std::move(entry.request), run.status, RequestOutcome::kInternal);
    return;
  }
  AnswerSucceeded(batch, run);
}

void RequestAnswerer::AnswerAbandoned(std::vector<QueuedRequest>& left) const {
  if (!left.empty()) {
    spdlog::warn("{}: exit timeout reached with {} request(s) still queued; answering them 503", label_,
                 left.size());
  }
  for (QueuedRequest& entry : left) {
    const std::string id = entry.request->id;
    Fail(std::move(entry.request),
         Unavailable(label_ + " is shutting down: request '" + id + "' was not run before the exit timeout"),
         RequestOutcome::kRejected);
  }
}

void RequestAnswerer::AnswerStopped(std::vector<QueuedRequest>& batch, RunWatchdog::RunEnd ending) const {
  for (QueuedRequest& entry : batch) {
    const std::string id = entry.request->id;
    if (ending == RunWatchdog::RunEnd::kAbandoned) {
      Fail(std::move(entry.request),
           Unavailable(label_ + " is shutting down: the run of request '" + id +
                       "' was stopped at the exit timeout"),
           RequestOutcome::kRejected);
    } else if (entry.request->cancelled && entry.request->cancelled->IsCancelled()) {
      Fail(std::move(entry.request),
           {StatusCode::kCancelled, "request '" + id + "' for " + label_ + " was cancelled; its run was terminated"},
           RequestOutcome::kCancelled);
    } else {
      Fail(std::move(entry.request),
           Unavailable("Request timeout expired (" + label_ + ", request '" + id + "'); its run was terminated"),
           RequestOutcome::kTimeout);
    }
  }
}

void RequestAnswerer::AnswerSucceeded(std::vector<QueuedRequest>& batch, BatchRun& run) const {
  // Tracing: the batch's times and span links go into its traced requests'
  // records before anyone is answered (a null check per request otherwise).
  RecordBatchTrace(batch, run.start, run.end, run.rows);
  const uint64_t input_ns = Nanos(run.start, run.input_end);
  const uint64_t infer_ns = Nanos(run.input_end, run.infer_end);
  const uint64_t output_ns = Nanos(run.infer_end, run.end);
  if (BatchStat* per_size = stats_->ForBatchSize(run.rows)) {
    per_size->compute_input.Add(input_ns);
    per_size->compute_infer.Add(infer_ns);
    per_size->compute_output.Add(output_ns);
  }
  stats_->inference_count.fetch_add(run.rows, std::memory_order_relaxed);
  stats_->execution_count.fetch_add(1, std::memory_order_relaxed);
  stats_->last_inference_ms.store(WallClockMs(), std::memory_order_relaxed);
  stats_->batch_size.Observe(run.rows);
  // Triton counts the batch's compute durations once per successful request;
  // one atomic add per counter for the whole batch says the same.
  const uint64_t n = batch.size();
  stats_->compute_input.Add(input_ns * n, n);
  stats_->compute_infer.Add(infer_ns * n, n);
  stats_->compute_output.Add(output_ns * n, n);
  for (size_t i = 0; i < batch.size(); ++i) {
    const Clock::time_point arrival = std::min(batch[i].request->arrival_time, batch[i].enqueue_time);
    const uint64_t request_ns = Nanos(arrival, run.end);
    const uint64_t queue_ns = Nanos(batch[i].enqueue_time, run.start);
    stats_->success.Add(request_ns);
    stats_->queue.Add(queue_ns);
    stats_->CountOutcome(RequestOutcome::kSuccess);
    stats_->request_duration.Observe(request_ns);
    stats_->queue_duration.Observe(queue_ns);
    stats_->compute_input_duration.Observe(input_ns);
    stats_->compute_infer_duration.Observe(infer_ns);
    stats_->compute_output_duration.Observe(output_ns);
    InferenceResponse& response = run.responses[i];
    response.queue_ns = queue_ns;
    response.compute_ns = input_ns + infer_ns + output_ns;
    response.batch_size = run.rows;
    completer_->Complete(std::move(batch[i].request), std::move(response));
  }
}

}  // namespace ortserve

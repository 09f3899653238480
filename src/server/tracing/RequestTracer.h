#pragma once
// The tracing both front ends share: decides whether a request is traced
// (W3C `traceparent` and the sample rate), and when it is answered turns its
// RequestTrace into spans for the sink.
//
// Per traced request, at completion:
//   request span   kind SERVER, parent = the caller's span from traceparent
//                  (none for a new trace); named after the RPC ("POST
//                  /v2/models/{model}/infer", "inference.GRPCInferenceService/
//                  ModelInfer"); attributes model, version, request id, the
//                  HTTP or gRPC status code; status ERROR for HTTP 5xx and the
//                  gRPC codes OpenTelemetry counts as server errors.
//   queue span     child of the request span: enqueue to batch start
//   compute span   child of the request span: the batch's start to end, with a
//                  link to the batch span and the batch's size
// and once per traced batch (by whichever of its requests finishes first):
//   batch span     kind INTERNAL, a root span of its own trace (a batch serves
//                  many traces), linked to the request span of every traced
//                  request that ran in it.
// A request that never ran (rejected, invalid, timed out in the queue) has a
// request span only.
//
// Sampling follows the trace settings of the request's model (TraceSettings.h,
// changed at run time through Triton's trace extension): none while its
// trace_level is OFF; otherwise a valid traceparent decides (sampled flag 1:
// traced, 0: not), and without one (or with an invalid one) the setting's
// trace_rate and trace_count decide whether a new trace starts.
#include <memory>
#include <optional>
#include <string_view>

#include <spdlog/spdlog.h>

#include "core/AccessLogRecord.h"
#include "core/Trace.h"
#include "server/tracing/Span.h"
#include "server/tracing/TraceSettings.h"

namespace ortserve::tracing {

class RequestTracer {
 public:
  RequestTracer(std::shared_ptr<SpanSink> sink, std::shared_ptr<TraceSettings> settings);
  // Settings of its own: always on, 1 of every round(1/sample_rate) requests
  // without a traceparent traced.
  RequestTracer(std::shared_ptr<SpanSink> sink, double sample_rate);

  // At a request's arrival. `traceparent`: the header (metadata) value, with
  // repeated ones joined by ','; nullopt when absent. `model`: the model the
  // request names (empty: the global setting decides). Null: not traced.
  std::shared_ptr<RequestTrace> Start(std::optional<std::string_view> traceparent,
                                      std::string_view model = {}) const;

  // When the front end has answered the request (any thread); `completed`
  // describes the answer as the access log sees it.
  void Finish(const RequestTrace& trace, const AccessLogRecord& completed) const;

 private:
  const std::shared_ptr<SpanSink> sink_;
  const std::shared_ptr<TraceSettings> settings_;
  const UnixTimeAnchor clock_anchor_;
};

// What a front end does once an infer request is answered: the access log
// line, for a traced request its spans, and at log_verbose_level 1 or more
// a debug line. Any may be absent; `if (report)` tells whether an
// AccessLogRecord is needed at all.
struct CompletionReport {
  AccessLogSink access_log;
  std::shared_ptr<const RequestTracer> tracer;  // set when `trace` is
  std::shared_ptr<RequestTrace> trace;

  // For a request arriving now: traced if `tracer` (null: tracing is off)
  // decides so, see RequestTracer::Start.
  static CompletionReport Start(AccessLogSink access_log, const std::shared_ptr<const RequestTracer>& tracer,
                                std::optional<std::string_view> traceparent, std::string_view model = {}) {
    CompletionReport report{std::move(access_log), nullptr, nullptr};
    if (tracer && (report.trace = tracer->Start(traceparent, model))) report.tracer = tracer;
    return report;
  }

  // Also true while verbose logging is on: each answer then logs a debug line.
  explicit operator bool() const { return access_log || trace || spdlog::should_log(spdlog::level::debug); }
  // The access log line, the spans and the debug line are written inside a
  // LogScope of the request (core/LogContext.h), with its trace ids.
  void operator()(const AccessLogRecord& record) const;
};

}  // namespace ortserve::tracing

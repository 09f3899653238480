#include "server/tracing/RequestTracer.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "core/LogContext.h"

namespace ortserve::tracing {
namespace {

// gRPC codes OpenTelemetry's RPC conventions count as server errors:
// UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS.
bool IsGrpcServerError(int code) {
  static constexpr std::array<int, 6> kServerErrors = {2, 4, 12, 13, 14, 15};
  return std::find(kServerErrors.begin(), kServerErrors.end(), code) != kServerErrors.end();
}

// The request span's name, protocol attributes and error status, following
// OpenTelemetry's HTTP and RPC conventions (4xx / client errors are not
// server errors).
void DescribeCall(const AccessLogRecord& completed, Span* span) {
  if (completed.protocol.starts_with("grpc")) {  // "grpc", or "grpc-stream" for ModelStreamInfer
    const std::string method = completed.protocol == "grpc-stream" ? "ModelStreamInfer" : "ModelInfer";
    span->name = "inference.GRPCInferenceService/" + method;
    span->attributes.push_back({"rpc.system", std::string("grpc")});
    span->attributes.push_back({"rpc.service", std::string("inference.GRPCInferenceService")});
    span->attributes.push_back({"rpc.method", method});
    span->attributes.push_back({"rpc.grpc.status_code", int64_t{completed.status_code}});
    span->error = IsGrpcServerError(completed.status_code);
  } else {
    span->name = "POST /v2/models/{model}/infer";
    span->attributes.push_back({"http.request.method", std::string("POST")});
    span->attributes.push_back({"http.route", std::string("/v2/models/{model}/infer")});
    span->attributes.push_back({"http.response.status_code", int64_t{completed.status_code}});
    span->error = completed.status_code >= 500;
  }
}

}  // namespace

RequestTracer::RequestTracer(std::shared_ptr<SpanSink> sink, std::shared_ptr<TraceSettings> settings)
    : sink_(std::move(sink)), settings_(std::move(settings)) {}

RequestTracer::RequestTracer(std::shared_ptr<SpanSink> sink, double sample_rate)
    : RequestTracer(std::move(sink),
                    std::make_shared<TraceSettings>(
                        TraceSettingValues{.level = kTraceLevelTimestamps,
                                           .rate = TraceSettings::RateForFraction(sample_rate)},
                        /*exporting=*/true)) {}

std::shared_ptr<RequestTrace> RequestTracer::Start(std::optional<std::string_view> traceparent,
                                                   std::string_view model) const {
  const std::shared_ptr<TraceSampler> sampler = settings_->SamplerFor(model);
  if (!sampler->enabled()) return nullptr;
  std::optional<TraceParent> parent;
  if (traceparent) parent = ParseTraceparent(*traceparent);
  if (parent ? !parent->sampled : !sampler->SampleNew()) return nullptr;
  auto trace = std::make_shared<RequestTrace>();
  if (parent) {
    trace->trace_id = parent->trace_id;
    trace->parent_span_id = parent->parent_id;
  } else {
    trace->trace_id = RandomTraceId();
  }
  trace->span_id = RandomSpanId();
  trace->start = TraceClock::now();
  return trace;
}

void RequestTracer::Finish(const RequestTrace& trace, const AccessLogRecord& completed) const {
  const TraceClock::time_point end = TraceClock::now();
  const SpanAttribute model{"ortserve.model", std::string(completed.model)};
  const SpanAttribute version{"ortserve.model_version", std::string(completed.version)};
  std::vector<Span> spans;
  spans.reserve(trace.batch ? 4 : 1);

  Span& request = spans.emplace_back();
  request.context = trace.context();
  request.parent_span_id = trace.parent_span_id;
  request.kind = SpanKind::kServer;
  request.start_unix_ns = clock_anchor_.UnixNanos(trace.start);
  request.end_unix_ns = clock_anchor_.UnixNanos(end);
  DescribeCall(completed, &request);
  request.attributes.push_back(model);
  if (!completed.version.empty()) request.attributes.push_back(version);
  if (!completed.request_id.empty()) {
    request.attributes.push_back({"ortserve.request_id", std::string(completed.request_id)});
  }

  if (const BatchTrace* batch = trace.batch.get()) {
    const SpanAttribute rows{"ortserve.batch.size", static_cast<int64_t>(batch->rows)};
    const SpanAttribute requests{"ortserve.batch.requests", static_cast<int64_t>(batch->requests)};

    Span& queue = spans.emplace_back();
    queue.context = {trace.trace_id, RandomSpanId()};
    queue.parent_span_id = trace.span_id;
    queue.name = "queue";
    queue.start_unix_ns = clock_anchor_.UnixNanos(trace.enqueue_time);
    queue.end_unix_ns = clock_anchor_.UnixNanos(batch->start);

    Span& compute = spans.emplace_back();
    compute.context = {trace.trace_id, RandomSpanId()};
    compute.parent_span_id = trace.span_id;
    compute.name = "compute";
    compute.start_unix_ns = clock_anchor_.UnixNanos(batch->start);
    compute.end_unix_ns = clock_anchor_.UnixNanos(batch->end);
    compute.attributes = {rows, requests};
    compute.links = {batch->span};

    // The batch span is emitted once, by the first of its requests to finish.
    if (!trace.batch->emitted.exchange(true, std::memory_order_acq_rel)) {
      Span& batch_span = spans.emplace_back();
      batch_span.context = batch->span;
      batch_span.name = "batch";
      batch_span.start_unix_ns = compute.start_unix_ns;
      batch_span.end_unix_ns = compute.end_unix_ns;
      batch_span.attributes = {model, version, rows, requests};
      batch_span.links = batch->request_spans;
    }
  }
  sink_->Push(spans);
}

void CompletionReport::operator()(const AccessLogRecord& record) const {
  AccessLogRecord traced = record;
  std::string trace_id, span_id;
  if (trace) {
    trace_id = trace->trace_id.Hex();
    span_id = trace->span_id.Hex();
    traced.trace_id = trace_id;
    traced.span_id = span_id;
  }
  LogContext context;
  context.model = record.model;
  context.version = record.version;
  context.request_id = record.request_id;
  if (trace) {
    context.trace_id = trace->trace_id;
    context.span_id = trace->span_id;
  }
  LogScope scope(context);
  if (access_log) access_log(traced);
  if (trace) tracer->Finish(*trace, traced);
  spdlog::debug("{} inference request answered: status {}, queue {} us, compute {} us, batch size {}",
                record.protocol, record.status_code, record.queue_ns / 1000, record.compute_ns / 1000,
                record.batch_size);
}

}  // namespace ortserve::tracing

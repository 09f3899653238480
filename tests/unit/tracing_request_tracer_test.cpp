// RequestTracer: the sampling decision and the spans of a finished request
// (request, queue, compute, and the batch span exactly once per batch).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "server/tracing/RequestTracer.h"

namespace ortserve::tracing {
namespace {

constexpr const char* kSampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
constexpr const char* kNotSampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";

class CollectingSink : public SpanSink {
 public:
  void Push(std::span<Span> spans) override {
    std::lock_guard lock(mu_);
    for (Span& span : spans) spans_.push_back(std::move(span));
  }
  std::vector<Span> Take() {
    std::lock_guard lock(mu_);
    return std::move(spans_);
  }

 private:
  std::mutex mu_;
  std::vector<Span> spans_;
};

const SpanAttribute* Attribute(const Span& span, const std::string& key) {
  auto it = std::find_if(span.attributes.begin(), span.attributes.end(),
                         [&](const SpanAttribute& a) { return a.key == key; });
  return it == span.attributes.end() ? nullptr : &*it;
}

std::string StringAttribute(const Span& span, const std::string& key) {
  const SpanAttribute* a = Attribute(span, key);
  return a && std::holds_alternative<std::string>(a->value) ? std::get<std::string>(a->value) : "<missing>";
}

int64_t IntAttribute(const Span& span, const std::string& key) {
  const SpanAttribute* a = Attribute(span, key);
  return a && std::holds_alternative<int64_t>(a->value) ? std::get<int64_t>(a->value) : -1;
}

const Span& Named(const std::vector<Span>& spans, const std::string& name) {
  auto it = std::find_if(spans.begin(), spans.end(), [&](const Span& s) { return s.name == name; });
  EXPECT_NE(it, spans.end()) << "no span named " << name;
  return *it;
}

AccessLogRecord Answered(std::string_view protocol, int status) {
  AccessLogRecord record;
  record.protocol = protocol;
  record.request_id = "req-7";
  record.model = "mlp";
  record.version = "3";
  record.status_code = status;
  return record;
}

TEST(RequestTracer, ASampledTraceparentContinuesTheCallersTrace) {
  RequestTracer tracer(std::make_shared<CollectingSink>(), /*sample_rate=*/0.0);
  auto trace = tracer.Start(std::string_view(kSampled));
  ASSERT_NE(trace, nullptr);
  EXPECT_EQ(trace->trace_id.Hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(trace->parent_span_id.Hex(), "00f067aa0ba902b7");
  EXPECT_TRUE(trace->span_id.valid());
  EXPECT_NE(trace->span_id, trace->parent_span_id);
}

TEST(RequestTracer, AnUnsampledTraceparentIsNeverTraced) {
  RequestTracer tracer(std::make_shared<CollectingSink>(), /*sample_rate=*/1.0);
  EXPECT_EQ(tracer.Start(std::string_view(kNotSampled)), nullptr);
}

TEST(RequestTracer, WithoutAValidTraceparentTheSampleRateDecides) {
  RequestTracer never(std::make_shared<CollectingSink>(), 0.0);
  EXPECT_EQ(never.Start(std::nullopt), nullptr);
  EXPECT_EQ(never.Start(std::string_view("garbage")), nullptr);
  RequestTracer always(std::make_shared<CollectingSink>(), 1.0);
  for (std::optional<std::string_view> header : {std::optional<std::string_view>(),
                                                 std::optional<std::string_view>("garbage")}) {
    auto trace = always.Start(header);
    ASSERT_NE(trace, nullptr);
    EXPECT_TRUE(trace->trace_id.valid());
    EXPECT_FALSE(trace->parent_span_id.valid());  // a new trace: the request span is its root
  }
}

TEST(RequestTracer, ARequestThatNeverRanHasOneServerSpan) {
  auto sink = std::make_shared<CollectingSink>();
  RequestTracer tracer(sink, 0.0);
  auto trace = tracer.Start(std::string_view(kSampled));
  tracer.Finish(*trace, Answered("http", 400));
  std::vector<Span> spans = sink->Take();
  ASSERT_EQ(spans.size(), 1u);
  const Span& request = spans[0];
  EXPECT_EQ(request.kind, SpanKind::kServer);
  EXPECT_EQ(request.context, trace->context());
  EXPECT_EQ(request.parent_span_id, trace->parent_span_id);
  EXPECT_EQ(request.name, "POST /v2/models/{model}/infer");
  EXPECT_EQ(StringAttribute(request, "ortserve.model"), "mlp");
  EXPECT_EQ(StringAttribute(request, "ortserve.model_version"), "3");
  EXPECT_EQ(StringAttribute(request, "ortserve.request_id"), "req-7");
  EXPECT_EQ(IntAttribute(request, "http.response.status_code"), 400);
  EXPECT_FALSE(request.error);  // a client error is not a server error
  EXPECT_LE(request.start_unix_ns, request.end_unix_ns);
  // Unix time, not steady-clock time: after 2020.
  EXPECT_GT(request.start_unix_ns, 1'577'836'800'000'000'000ull);
}

TEST(RequestTracer, ServerErrorsFollowTheOpenTelemetryConventions) {
  auto sink = std::make_shared<CollectingSink>();
  RequestTracer tracer(sink, 1.0);
  struct Case {
    const char* protocol;
    int status;
    bool error;
  };
  for (const Case& c : {Case{"http", 200, false}, Case{"http", 404, false}, Case{"http", 500, true},
                        Case{"http", 503, true}, Case{"grpc", 0, false}, Case{"grpc", 3, false},
                        Case{"grpc", 5, false}, Case{"grpc", 13, true}, Case{"grpc", 14, true}}) {
    tracer.Finish(*tracer.Start(std::nullopt), Answered(c.protocol, c.status));
    std::vector<Span> spans = sink->Take();
    ASSERT_EQ(spans.size(), 1u);
    EXPECT_EQ(spans[0].error, c.error) << c.protocol << " " << c.status;
  }
  tracer.Finish(*tracer.Start(std::nullopt), Answered("grpc", 0));
  const Span request = sink->Take().at(0);
  EXPECT_EQ(request.name, "inference.GRPCInferenceService/ModelInfer");
  EXPECT_EQ(IntAttribute(request, "rpc.grpc.status_code"), 0);
  EXPECT_EQ(StringAttribute(request, "rpc.system"), "grpc");
}

TEST(RequestTracer, RequestsThatRanGetQueueAndComputeSpansAndTheBatchSpanOnce) {
  auto sink = std::make_shared<CollectingSink>();
  RequestTracer tracer(sink, 1.0);
  auto first = tracer.Start(std::string_view(kSampled));
  auto second = tracer.Start(std::nullopt);
  // What the scheduler records (scheduler/BatchTracing.h).
  auto batch = std::make_shared<BatchTrace>();
  batch->span = {RandomTraceId(), RandomSpanId()};
  batch->start = first->start + std::chrono::milliseconds(2);
  batch->end = batch->start + std::chrono::milliseconds(5);
  batch->rows = 3;
  batch->requests = 2;
  batch->request_spans = {first->context(), second->context()};
  for (auto* trace : {first.get(), second.get()}) {
    trace->enqueue_time = first->start + std::chrono::milliseconds(1);
    trace->batch = batch;
  }

  tracer.Finish(*first, Answered("http", 200));
  std::vector<Span> spans = sink->Take();
  ASSERT_EQ(spans.size(), 4u);
  const Span& request = Named(spans, "POST /v2/models/{model}/infer");
  const Span& queue = Named(spans, "queue");
  const Span& compute = Named(spans, "compute");
  const Span& batch_span = Named(spans, "batch");

  for (const Span* child : {&queue, &compute}) {
    EXPECT_EQ(child->context.trace_id, first->trace_id);
    EXPECT_EQ(child->parent_span_id, request.context.span_id);
    EXPECT_EQ(child->kind, SpanKind::kInternal);
    EXPECT_NE(child->context.span_id, request.context.span_id);
  }
  EXPECT_EQ(queue.end_unix_ns - queue.start_unix_ns, 1'000'000u);
  EXPECT_EQ(queue.end_unix_ns, compute.start_unix_ns);
  EXPECT_EQ(compute.end_unix_ns - compute.start_unix_ns, 5'000'000u);
  ASSERT_EQ(compute.links.size(), 1u);
  EXPECT_EQ(compute.links[0], batch->span);
  EXPECT_EQ(IntAttribute(compute, "ortserve.batch.size"), 3);

  EXPECT_EQ(batch_span.context, batch->span);
  EXPECT_FALSE(batch_span.parent_span_id.valid());
  EXPECT_EQ(batch_span.kind, SpanKind::kInternal);
  EXPECT_EQ(batch_span.links, (std::vector<SpanContext>{first->context(), second->context()}));
  EXPECT_EQ(IntAttribute(batch_span, "ortserve.batch.requests"), 2);
  EXPECT_EQ(StringAttribute(batch_span, "ortserve.model"), "mlp");

  // The second request of the batch: its own three spans, no second batch span.
  tracer.Finish(*second, Answered("grpc", 0));
  spans = sink->Take();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(std::count_if(spans.begin(), spans.end(), [](const Span& s) { return s.name == "batch"; }), 0);
  EXPECT_EQ(Named(spans, "compute").links.at(0), batch->span);
  EXPECT_FALSE(Named(spans, "inference.GRPCInferenceService/ModelInfer").parent_span_id.valid());
}

TEST(CompletionReport, IsEmptyWithoutAccessLogAndTrace) {
  auto tracer = std::make_shared<const RequestTracer>(std::make_shared<CollectingSink>(), 0.0);
  EXPECT_FALSE(CompletionReport::Start(nullptr, nullptr, std::string_view(kSampled)));
  EXPECT_FALSE(CompletionReport::Start(nullptr, tracer, std::string_view(kNotSampled)));
  CompletionReport traced = CompletionReport::Start(nullptr, tracer, std::string_view(kSampled));
  EXPECT_TRUE(traced);
  EXPECT_EQ(traced.tracer, tracer);
  int logged = 0;
  CompletionReport logged_only =
      CompletionReport::Start([&](const AccessLogRecord&) { ++logged; }, tracer, std::nullopt);
  ASSERT_TRUE(logged_only);
  EXPECT_EQ(logged_only.trace, nullptr);
  logged_only(Answered("http", 200));
  EXPECT_EQ(logged, 1);
}

}  // namespace
}  // namespace ortserve::tracing

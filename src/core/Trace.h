#pragma once
// Distributed tracing, the part every layer may see: W3C trace context
// (`traceparent`) parsing and formatting, random trace/span ids, and the
// per-request trace record that travels with an InferenceRequest.
//
// Who writes what in a RequestTrace: the front end creates it (ids, start)
// before handing the request on; the scheduler fills in `enqueue_time` and
// `batch` for a request that ran, before calling on_complete; the front end
// reads it back after on_complete (which happens-before its own completion
// code) to emit the spans. An untraced request carries a null pointer and
// costs the scheduler one null check.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ortserve {

// The request path's clock (InferenceRequest.h's Clock).
using TraceClock = std::chrono::steady_clock;

struct TraceId {
  std::array<uint8_t, 16> bytes{};
  bool valid() const;  // not all zero (W3C: all zero is invalid)
  std::string Hex() const;
  bool operator==(const TraceId&) const = default;
};

struct SpanId {
  std::array<uint8_t, 8> bytes{};
  bool valid() const;
  std::string Hex() const;
  bool operator==(const SpanId&) const = default;
};

// One span of one trace (what an OTLP link points at).
struct SpanContext {
  TraceId trace_id;
  SpanId span_id;
  bool operator==(const SpanContext&) const = default;
};

// A parsed `traceparent`: the caller's trace, the caller's span (our parent)
// and whether the caller sampled it.
struct TraceParent {
  TraceId trace_id;
  SpanId parent_id;
  bool sampled = false;
};

// W3C Trace Context level 1: "00-<32 hex>-<16 hex>-<2 hex>", lowercase hex,
// exactly 55 characters for version 00. A higher version is parsed by its
// first four fields (it may be longer, the next character being '-'); version
// ff, an all-zero trace or parent id, uppercase hex or any other deviation
// makes it invalid (nullopt), and the caller then starts a new trace as if
// there was no header. Leading/trailing spaces and tabs (HTTP OWS) are
// ignored. Repeated headers joined with ',' are invalid, as the spec wants.
std::optional<TraceParent> ParseTraceparent(std::string_view header);
// "00-<trace id>-<span id>-0<1 if sampled else 0>".
std::string FormatTraceparent(const TraceParent& context);
// Collects the values of a traceparent header (or gRPC metadata key):
// repeats are joined with ',' as HTTP combines fields (RFC 9110), which
// ParseTraceparent rejects, so a request with two starts a trace of its own.
void AddTraceparentValue(std::optional<std::string>* collected, std::string_view value);

// Random non-zero ids from a thread-local generator seeded once per thread
// from std::random_device: no lock, no system call per id.
TraceId RandomTraceId();
SpanId RandomSpanId();

// One traced batch, shared by the traced requests that ran in it. The
// batch span gets its own trace (a batch serves requests of many traces) and
// links to the request span of every traced request of the batch.
struct BatchTrace {
  SpanContext span;  // the batch span's own trace and span id
  TraceClock::time_point start;
  TraceClock::time_point end;
  uint64_t rows = 0;      // batch size (summed dim 0)
  size_t requests = 0;    // requests in the batch, traced or not
  std::vector<SpanContext> request_spans;  // the traced ones, in batch order
  // The batch span is emitted once, by whichever of its requests finishes
  // first (any of them may be dropped, e.g. when its client goes away).
  std::atomic<bool> emitted{false};
};

struct RequestTrace {
  TraceId trace_id;
  SpanId span_id;         // the request span
  SpanId parent_span_id;  // the caller's span; all zero for a new trace
  TraceClock::time_point start;
  // Set by the scheduler for a request that ran (see the file comment).
  TraceClock::time_point enqueue_time{};
  std::shared_ptr<BatchTrace> batch;  // null: it never ran

  SpanContext context() const { return {trace_id, span_id}; }
};

}  // namespace ortserve

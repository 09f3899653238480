#pragma once
// A finished span as the OTLP exporter sends it, and the interface through
// which spans leave the request path (SpanSink). Times are unix nanoseconds:
// spans are made from steady-clock readings converted by one UnixTimeAnchor
// taken at startup, so a wall-clock step (NTP) never bends a span.
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/Trace.h"

namespace ortserve::tracing {

// OTLP's Span.SpanKind numbers.
enum class SpanKind : int { kInternal = 1, kServer = 2 };

struct SpanAttribute {
  std::string key;
  std::variant<std::string, int64_t> value;
};

struct Span {
  SpanContext context;     // its trace and its own span id
  SpanId parent_span_id;   // all zero: a root span
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  uint64_t start_unix_ns = 0;
  uint64_t end_unix_ns = 0;
  std::vector<SpanAttribute> attributes;
  std::vector<SpanContext> links;
  bool error = false;  // OTLP status ERROR; otherwise the status is left unset
};

// Where finished spans go. Push must never block on I/O: it is called on the
// front ends' I/O threads.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  // Takes the spans (moves from them); may drop them.
  virtual void Push(std::span<Span> spans) = 0;
};

// Converts steady-clock time points to unix nanoseconds using one pair of
// readings (steady, system) taken at construction.
class UnixTimeAnchor {
 public:
  UnixTimeAnchor()
      : steady_(std::chrono::steady_clock::now()), system_(std::chrono::system_clock::now()) {}

  uint64_t UnixNanos(std::chrono::steady_clock::time_point t) const {
    const auto since_epoch = system_.time_since_epoch() +
                             std::chrono::duration_cast<std::chrono::system_clock::duration>(t - steady_);
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count();
    return ns > 0 ? static_cast<uint64_t>(ns) : 0;
  }

 private:
  std::chrono::steady_clock::time_point steady_;
  std::chrono::system_clock::time_point system_;
};

}  // namespace ortserve::tracing

#pragma once
// Sends spans to an OpenTelemetry collector over OTLP/HTTP with JSON bodies
// (POST <endpoint>, Content-Type: application/json), from one background
// thread ("otlp-export").
//
// The request path never waits for the collector: Push() takes a mutex for a
// vector append and drops what does not fit in the bounded buffer
// (options.buffer_spans), counting it as dropped_buffer_full. The thread
// takes everything buffered when max_export_spans are waiting or every
// export_interval (so the buffer refills while an export is under way), and
// POSTs it in requests of at most max_export_spans on one keep-alive
// connection, each with a deadline (export_timeout) over connect, write and
// read.
// A failed export (refused, timed out, a non-2xx answer) is not retried: its
// spans are counted as dropped_export_failed, so a collector that is down
// costs the server a failed connect per interval and nothing more.
//
// Lifetime: Create() validates the endpoint and starts the thread;
// Shutdown(timeout) (also run by the destructor, with no wait) stops taking
// spans, exports what is buffered until the timeout (an export already under
// way keeps its own deadline), and joins the thread.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/Status.h"
#include "server/tracing/OtlpJson.h"
#include "server/tracing/Span.h"

namespace ortserve::tracing {

struct OtlpExporterOptions {
  // http://host[:port][/path]. Without a path (or "/"), /v1/traces is used,
  // as OTEL_EXPORTER_OTLP_ENDPOINT does; the port defaults to 80.
  std::string endpoint;
  size_t buffer_spans = 8192;
  size_t max_export_spans = 512;
  std::chrono::milliseconds export_interval{1000};
  std::chrono::milliseconds export_timeout{5000};
  OtlpResource resource;
};

struct OtlpEndpoint {
  std::string host;  // without brackets for IPv6
  std::string port;
  std::string target;  // path and query
};

// Parses OtlpExporterOptions::endpoint; https:// and other schemes are
// refused with a message that names the value.
Result<OtlpEndpoint> ParseOtlpEndpoint(const std::string& endpoint);

struct TraceExportCounters {
  uint64_t exported = 0;               // spans a collector accepted (2xx)
  uint64_t dropped_buffer_full = 0;    // spans Push() found no room for
  uint64_t dropped_export_failed = 0;  // spans of exports that failed
  uint64_t failed_exports = 0;         // POSTs that failed
  uint64_t buffered = 0;               // spans waiting now
};

class OtlpExporter final : public SpanSink {
 public:
  static Result<std::unique_ptr<OtlpExporter>> Create(OtlpExporterOptions options);
  ~OtlpExporter() override;
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  // Any thread; never waits for I/O (see the file comment).
  void Push(std::span<Span> spans) override;
  // Idempotent; see the file comment. Spans still buffered at the timeout
  // are dropped (and logged).
  void Shutdown(std::chrono::milliseconds timeout);
  TraceExportCounters counters() const;
  const OtlpEndpoint& endpoint() const { return endpoint_; }

 private:
  OtlpExporter(OtlpExporterOptions options, OtlpEndpoint endpoint);
  void Run();
  class Connection;

  const OtlpExporterOptions options_;
  const OtlpEndpoint endpoint_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Span> buffer_;                                  // guarded by mu_
  bool stopping_ = false;                                     // guarded by mu_
  std::chrono::steady_clock::time_point shutdown_deadline_;  // guarded by mu_
  TraceExportCounters counters_;                              // guarded by mu_ (buffered: buffer_.size())

  std::mutex shutdown_mu_;  // serialises Shutdown()
  std::thread thread_;
};

}  // namespace ortserve::tracing

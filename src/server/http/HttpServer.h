#pragma once
// The KServe v2 / Triton-compatible HTTP/1.1 front end (Boost.Beast).
//
// Threads: `io_threads` I/O threads, each running its own io_context;
// connections are spread over them round robin, and each stays on its
// thread for its whole life, handling one request at a time, in order
// (pipelining-safe). One more thread, "http-inflate", finishes compressed
// request bodies that inflate to more than a small budget (HttpService.h).
// I/O threads never run or wait for inference: infer
// requests go to Model::Infer and their completion is posted back to the
// connection's I/O thread to be encoded and written. A client that disconnects
// while its request is in flight gets its request's CancelFlag set; the late
// completion is then dropped harmlessly.
//
// Shutdown order (what main() does):
//   StopAccepting();           // close the port, health/ready → not ready,
//                              // new infer requests → 503
//   repository->Shutdown(deadline);  // every request handed to a model is
//                              // answered (computed, or 503 at the deadline)
//   WaitForInFlight(grace);    // those answers are handed to their connections
//   Stop();                    // close connections, join the I/O threads
// Completions that still arrive after Stop() are dropped safely.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/AccessLogRecord.h"
#include "core/Status.h"
#include "server/auth/AccessPolicy.h"
#include "server/common/ClientQuotas.h"
#include "server/common/SharedMemoryRegistry.h"
#include "server/common/RuntimeSettings.h"
#include "server/common/TensorLimits.h"
#include "server/http/InferRequestDecoder.h"

namespace ortserve {

class ModelRepository;
namespace tracing {
class RequestTracer;
}

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 8000;  // 0: any free port (see port())
  int io_threads = 4;
  // Largest request body, before and after decompression (→ 400, as Triton).
  size_t max_input_size = size_t{64} << 20;
  // Largest request line + headers (→ 431).
  size_t max_header_bytes = size_t{16} << 10;
  // Chunks of one chunked request body at most (→ 400, as Triton): bounds the parsing
  // a body of tiny chunks costs, which the byte limit alone does not.
  size_t max_body_chunks = 65536;
  // Client connections open at once at most. One more is answered 503 at
  // once (HTTPS: closed) without reading its request, and counted.
  size_t max_connections = 1024;
  // JSON of an infer request nested deeper than this (objects and arrays
  // together) is refused (→ 400).
  size_t max_json_depth = http::kDefaultMaxJsonDepth;
  // Elements of one input tensor at most (→ 400), checked from its shape
  // before any data is decoded.
  uint64_t max_tensor_elements = common::kDefaultMaxTensorElements;
  // health/ready also requires every model in the repository to be ready.
  bool strict_readiness = false;
  std::string server_version = "0.0.0";
  // A connection that starts no request for this long is closed; also
  // bounds a write to a client that does not read.
  std::chrono::seconds idle_timeout{60};
  // A request must be received completely (headers and body) within this
  // time of its first byte, else its connection is closed: a client that
  // trickles a request (slow loris) cannot hold the connection.
  std::chrono::seconds read_timeout{60};
  // Called once per completed infer request (see core/AccessLogRecord.h).
  AccessLogSink access_log;
  // --http-restricted-api (server/auth/AccessPolicy.h); null or empty: open.
  std::shared_ptr<const auth::AccessPolicy> access_policy{};
  // Explicit model control: allow load/unload although the model-repository
  // group is not restricted (otherwise they answer 403).
  bool allow_unauthenticated_model_control = false;
  // Reads the W3C traceparent header and traces requests (see
  // server/tracing/RequestTracer.h); null: no tracing work at all.
  std::shared_ptr<const tracing::RequestTracer> tracer{};
  // The system shared memory regions, shared with the gRPC front end
  // (server/common/SharedMemoryRegistry.h); null: a registry of its own with
  // client shared memory disabled.
  std::shared_ptr<common::SharedMemoryRegistry> shared_memory{};
  // Triton's logging and trace extensions (/v2/logging, .../trace/setting).
  common::RuntimeSettings runtime_settings{};
  // Per-client quotas (--client-quota-config, --client-id-header).
  common::QuotaSettings quotas{};
  // HTTPS (--http-use-ssl). PEM files; Create() fails naming a file that is
  // missing, unreadable, not PEM, or a key that does not match the cert.
  struct Tls {
    bool enabled = false;
    std::string server_cert_file;
    std::string server_key_file;
    // Non-empty: mutual TLS, a client certificate signed by it is required.
    std::string root_cert_file;
  } tls{};
};

class HttpServer {
 public:
  // Validates the options (and loads the TLS files); binds nothing yet. `repository` must outlive the
  // server.
  static Result<std::unique_ptr<HttpServer>> Create(HttpServerOptions options, ModelRepository* repository);
  ~HttpServer();  // Stop()

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O threads. kUnavailable if the address
  // cannot be bound (names address, port and the OS error).
  Status Start();
  // The bound port (useful with port 0); 0 before Start().
  uint16_t port() const;
  // Closes the listening socket; health/ready turns not-ready; new infer
  // requests on open connections answer 503. Idempotent.
  void StopAccepting();
  // health/ready turns not-ready while requests are still served (before
  // StopAccepting(): main()'s --drain-delay-secs). Idempotent.
  void MarkNotReady();
  // Waits until no infer request is inside a model; true if none is left.
  bool WaitForInFlight(std::chrono::milliseconds timeout);
  // Closes every connection (cancelling in-flight requests) and joins the
  // I/O threads. Idempotent.
  void Stop();
  // Client connections open right now (for the metrics endpoint). Any thread.
  size_t OpenConnections() const;
  // Connections refused because max_connections were open. Any thread.
  uint64_t RejectedConnections() const;

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortserve

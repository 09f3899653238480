#pragma once
// The KServe v2 gRPC front end (service inference.GRPCInferenceService, wire
// compatible with Triton's), plus grpc.health.v1.Health/Check.
//
// Threads: `completion_queue_threads` completion queues, one polling thread
// each (named "grpc-cq-N"); gRPC's own internal threads come on top. No thread
// ever waits on inference: ModelInfer/ModelStreamInfer hand the request to the
// model and return to polling; the model's completion callback (any thread)
// only wakes the call's queue, and the response is encoded and written on that
// queue's thread.
//
// Lifetime: Create() validates, Start() binds and starts serving, Stop(drain)
// stops accepting calls, lets in-flight calls finish until the drain deadline,
// cancels what is left (their inference requests see the cancel flag) and
// returns once every call has been answered — which needs the repository to
// keep honouring on_complete. main() calls StopAccepting(), lets
// ModelRepository::Shutdown(deadline) answer every accepted request, then
// Stop() with a short grace for writing those answers.
// The destructor stops the server if Stop() was not called.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/AccessLogRecord.h"
#include "core/Status.h"
#include "server/auth/AccessPolicy.h"
#include "server/common/ClientQuotas.h"
#include "server/common/SharedMemoryRegistry.h"
#include "server/common/RuntimeSettings.h"
#include "server/common/TensorLimits.h"

namespace ortserve {

class ModelRepository;
namespace tracing {
class RequestTracer;
}

struct GrpcServerOptions {
  std::string address = "0.0.0.0";  // IPv6 addresses without brackets are fine ("::")
  uint16_t port = 8001;             // 0: any free port, see GrpcServer::port()
  // Completion queues, each polled by one thread. 2 keeps one core's worth of
  // protocol work off the inference threads and is plenty for thousands of
  // small requests per second; raise it only when profiling shows the gRPC
  // threads saturated.
  int completion_queue_threads = 2;
  // Largest message received or sent, in bytes (the HTTP body limit's default).
  // A larger request fails with RESOURCE_EXHAUSTED before it reaches the server.
  size_t max_message_bytes = 64u << 20;
  // HTTP/2 streams (calls) one connection may have open at once
  // (SETTINGS_MAX_CONCURRENT_STREAMS); a client queues further calls on its
  // side. Triton sets none (gRPC's default: unbounded); 128 is nginx's
  // default and above the 100 RFC 9113 recommends, so that no Triton client
  // notices it, while one connection cannot open thousands of calls.
  int max_concurrent_streams = 128;
  // Connections open at once (--grpc-max-connections), plaintext
  // (GrpcAcceptor.h) or TLS (TlsConnectionGate.h); one more is closed at
  // once, unanswered. The HTTP port's default: each connection holds a
  // descriptor (docs/limits.md, "Connections, descriptors and threads").
  size_t max_connections = 1024;
  // The gRPC library's memory quota for the whole server (grpc::ResourceQuota):
  // bytes held by messages being received (and the transport's buffers).
  // Near it gRPC shrinks the flow-control windows it grants, then closes idle
  // connections and cancels streams until memory is under it again, so that
  // calls announcing large messages and never finishing cannot grow the
  // server without bound (RSS overshoots it: gRPC reclaims after the fact).
  // At least max_message_bytes.
  size_t max_buffered_bytes = size_t{1} << 30;
  // Elements of one input tensor at most (→ RESOURCE_EXHAUSTED), checked
  // from its shape before its contents are read.
  uint64_t max_tensor_elements = common::kDefaultMaxTensorElements;
  // Server readiness (ServerReady, health check): true only when every model in
  // the repository is ready if strict, else as soon as the server is live.
  bool strict_readiness = true;
  // ServerMetadata's version (name and extensions: common::DescribeServer).
  std::string server_version;
  // Called once per completed ModelInfer call (see core/AccessLogRecord.h).
  AccessLogSink access_log;
  // --grpc-restricted-protocol (server/auth/AccessPolicy.h): the metadata key
  // and value each restricted API group requires. Null or empty: all open.
  std::shared_ptr<const auth::AccessPolicy> access_policy{};
  // Explicit model control: allow RepositoryModelLoad/Unload although the
  // model-repository group is not restricted (otherwise PERMISSION_DENIED).
  bool allow_unauthenticated_model_control = false;
  // Reads the W3C `traceparent` metadata of ModelInfer calls and traces them
  // (see server/tracing/RequestTracer.h); null: no tracing work at all.
  std::shared_ptr<const tracing::RequestTracer> tracer{};
  // The system shared memory regions, shared with the HTTP front end
  // (server/common/SharedMemoryRegistry.h); null: a registry of its own with
  // client shared memory disabled.
  std::shared_ptr<common::SharedMemoryRegistry> shared_memory{};
  // Triton's logging and trace extensions (LogSettings, TraceSetting).
  common::RuntimeSettings runtime_settings{};
  // Per-client quotas (--client-quota-config, --client-id-header): the id is
  // the header's metadata value, else the peer's IP address.
  common::QuotaSettings quotas{};
  // TLS (--grpc-use-ssl, --grpc-use-ssl-mutual), PEM files. Create() fails
  // naming a file that is missing, unreadable or not PEM.
  struct Tls {
    bool enabled = false;
    bool mutual = false;  // require and verify a client certificate (needs root_cert_file)
    std::string server_cert_file;
    std::string server_key_file;
    std::string root_cert_file;
  } tls{};
};

class GrpcServer {
 public:
  // Fails with kInvalidArgument naming the bad option. `repository` must
  // outlive the server.
  static Result<std::unique_ptr<GrpcServer>> Create(GrpcServerOptions options,
                                                    ModelRepository* repository);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds address:port and starts the polling threads. kUnavailable when the
  // port cannot be bound (it is in use: SO_REUSEPORT is off).
  Status Start();
  // The bound port (the chosen one when options.port was 0); 0 before Start().
  uint16_t port() const;
  // Refuses new inference requests (UNAVAILABLE) and reports not ready,
  // while calls in flight go on; Stop() follows. Idempotent.
  void StopAccepting();
  // ServerReady turns false while requests are still served (before
  // StopAccepting(): main()'s --drain-delay-secs). Idempotent.
  void MarkNotReady();
  // Graceful stop, see the class comment. Idempotent.
  void Stop(std::chrono::milliseconds drain);
  // Calls and streams in progress right now (for the metrics endpoint). Any thread.
  size_t ActiveCalls() const;
  // Connections open right now and connections closed at once over
  // max_connections, plaintext or TLS. Any thread.
  size_t OpenConnections() const;
  uint64_t RejectedConnections() const;

  class Impl;

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortserve

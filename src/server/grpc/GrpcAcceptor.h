#pragma once
// The accept loop of a plaintext gRPC port, ortserve's own: it accepts each
// connection and hands its descriptor to gRPC (grpc::AddInsecureChannelFromFd),
// pacing itself as the HTTP and metrics listeners do (common::AcceptPacer)
// when accepting fails for want of descriptors, and holding the connections
// it handed over to the ConnectionLimit (one more is closed at once,
// unanswered); a connection is handed over once its client has sent
// something, and closed if it sends nothing for kHandshakeTimeout.
// gRPC 1.51's own acceptor logs one "Failed accept4" on EMFILE and never
// accepts on that port again. A TLS port keeps gRPC's acceptor: 1.51 hands
// only plaintext descriptors over (its limit: TlsConnectionGate.h).
//
// Threads: one, "grpc-accept", which only accepts. Internal to src/server/grpc.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "core/Status.h"
#include "server/grpc/ConnectionLimit.h"

namespace ortserve::grpcfe {

class GrpcAcceptor {
 public:
  // Listens on address:port, port 0 meaning any free port. `address` is an
  // IP address ("::" takes IPv4 too) or a host name, which listens on every
  // address it resolves to (the same port on each; one that cannot be bound
  // is logged and left out, as gRPC does). kUnavailable naming the endpoint
  // when none can be. `limit` must outlive the acceptor.
  static Result<std::unique_ptr<GrpcAcceptor>> Listen(const std::string& address, uint16_t port,
                                                      ConnectionLimit* limit);
  ~GrpcAcceptor();
  GrpcAcceptor(const GrpcAcceptor&) = delete;
  GrpcAcceptor& operator=(const GrpcAcceptor&) = delete;

  uint16_t port() const;
  // Accepts on its thread, handing each connection to `server` (which must
  // outlive Stop()).
  void Start(grpc::Server* server);
  // Stops accepting and closes the listeners; connections already handed
  // over stay with gRPC. Idempotent.
  void Stop();

  class Impl;

 private:
  explicit GrpcAcceptor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortserve::grpcfe

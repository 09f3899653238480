#pragma once
// --grpc-max-connections: the decision, for a connection just accepted,
// whether to serve it or close it at once. Shared by the two ways a gRPC
// port accepts: ortserve's own acceptor on a plaintext port (GrpcAcceptor.h)
// and, on a TLS port, gRPC's acceptor through the socket mutator
// (TlsConnectionGate.h). A server has one port, so one count and one limit.
//
// The connections served are the entries of a HandedOverConnections (one
// fstat each to learn which gRPC has closed); they are checked only once the
// entries reach the limit, and then at most once per kCheckInterval, so a
// flood of connections at the limit costs one check per interval, not one per
// connection.
//
// Thread-safe (gRPC may accept on several threads). Internal to src/server/grpc.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "server/common/RefusedConnections.h"
#include "server/grpc/HandedOverConnections.h"

namespace ortserve::grpcfe {

// How long a gRPC connection may take to say something before it is closed:
// the first bytes on a plaintext port, the TLS handshake and HTTP/2 settings
// on a TLS port. Silent connections cannot hold the limit's slots for good.
inline constexpr std::chrono::seconds kHandshakeTimeout{10};

class ConnectionLimit {
 public:
  static constexpr std::chrono::milliseconds kCheckInterval{100};

  // `connections` must outlive the limit; max_connections >= 1.
  ConnectionLimit(size_t max_connections, HandedOverConnections* connections);

  // Whether max_connections are open, counting `pending` connections
  // accepted but not yet remembered.
  bool Full(size_t pending = 0);
  // A connection just accepted as `fd` (its client at `peer_ip`, "" when not
  // needed): remembered and true below the limit; false at it, counted as
  // refused (the caller closes it).
  bool Admit(int fd, std::string peer_ip);
  // Counts one refusal (Admit() does it itself).
  void Refuse() { refused_.Count(max_); }

  size_t max() const { return max_; }
  uint64_t Refused() const { return refused_.count(); }
  size_t Open() { return connections_->Open(); }
  // Where a connection admitted without Admit() (the plaintext acceptor
  // decides at accept, hands over later) is remembered.
  HandedOverConnections& connections() { return *connections_; }

 private:
  bool FullLocked(size_t pending);

  const size_t max_;
  HandedOverConnections* const connections_;
  common::RefusedConnections refused_{"grpc", "--grpc-max-connections", "closed unanswered"};
  std::mutex mu_;
  std::chrono::steady_clock::time_point next_check_{};  // guarded by mu_
};

}  // namespace ortserve::grpcfe

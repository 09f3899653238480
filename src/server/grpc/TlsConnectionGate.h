#pragma once
// --grpc-max-connections on a TLS port, which gRPC 1.51 accepts itself
// (grpc_server_add_channel_from_fd takes plaintext descriptors only). gRPC
// calls a socket mutator (GRPC_ARG_SOCKET_MUTATOR) for each connection its
// acceptor takes, before the TLS handshake (tcp_server_posix.cc, on_read):
// below the limit the connection is remembered (ConnectionLimit); at it, the
// socket is shut down (shutdown(SHUT_RDWR)), so that gRPC's handshake reads
// the end of the stream and closes it at once: the client's call fails
// UNAVAILABLE, nothing was decrypted. The mutator always answers true: on
// false gRPC shuts the whole listener down.
//
// Internal to src/server/grpc.
#include <memory>

#include <grpcpp/impl/server_builder_option.h>

#include "server/grpc/ConnectionLimit.h"

namespace ortserve::grpcfe {

// What the mutator does with a connection gRPC just accepted as `fd`: true
// when it is served, false when it was shut down over the limit.
bool GateAcceptedConnection(ConnectionLimit& limit, int fd);

// Installs the mutator in a grpc::ServerBuilder (SetOption). gRPC owns the
// mutator, which keeps `limit` alive while gRPC holds it. Null when this
// gRPC is not one whose mutator layout ortserve mirrors
// (GrpcSocketMutatorAbi.h): the TLS port then has no connection limit.
std::unique_ptr<grpc::ServerBuilderOption> TlsConnectionGate(std::shared_ptr<ConnectionLimit> limit);

}  // namespace ortserve::grpcfe

#pragma once
// gRPC's own log lines (gpr_log: its transports, resolvers, acceptor) go
// through ortserve's logger, so they carry its format (--log-format=json
// included) instead of gRPC's plain stderr lines. gRPC's verbosity
// (GRPC_VERBOSITY, default ERROR) still decides which lines are written.
//
// One line also changes the server's state: gRPC 1.51's own acceptor, which
// a TLS port keeps (docs/limits.md, "TLS ports"), logs `Failed accept4`
// once when accept fails (EMFILE) and never accepts on that port again.
// Seen on a TLS port, the server is marked not live (server/common/
// Liveness.h), so that /v2/health/live fails and a supervisor restarts it,
// instead of serving on with a port nobody can reach. Plaintext ports use
// ortserve's acceptor, which backs off and never gives up.

namespace ortserve::grpcfe {

// Installs the bridge (gpr_set_log_function). `tls_listener`: the port is
// gRPC's own TLS acceptor, so `Failed accept4` means it stopped for good.
void RouteGrpcLogs(bool tls_listener);

// What the bridge does with one line, without gRPC: for tests.
// severity: 0 debug, 1 info, 2 error (gpr_log_severity).
void HandleGrpcLogLine(int severity, const char* file, int line, const char* message);

}  // namespace ortserve::grpcfe

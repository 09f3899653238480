#pragma once
// Whether the server can still do its job, as /v2/health/live and gRPC's
// ServerLive report it. A process-wide fact, because what breaks it is
// process-wide: today one thing, gRPC's own acceptor giving up on a TLS port
// (server/grpc/GrpcLogBridge.h). Once not live, the server stays so: the
// supervisor (Kubernetes' liveness probe, systemd) restarts it.

#include <optional>
#include <string>

namespace ortserve::common {

// Records `reason` (the first one is kept) and logs it once as an error.
// Thread-safe; callable from any thread, including gRPC's.
void MarkNotLive(const std::string& reason);

// nullopt while live; else the first reason given to MarkNotLive.
std::optional<std::string> NotLiveReason();

// For tests: live again, no reason.
void ResetLivenessForTesting();

}  // namespace ortserve::common

#include "server/grpc/GrpcLogBridge.h"

#include <atomic>
#include <cstring>
#include <string>

#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

#include "server/common/Liveness.h"

namespace ortserve::grpcfe {
namespace {

std::atomic<bool> tls_acceptor{false};

// The text gRPC 1.51's tcp_server_posix.cc logs when accept4 fails with an
// error other than EAGAIN/ECONNABORTED/EINTR, just before it drops the
// listener.
constexpr const char* kAcceptorGaveUp = "Failed accept4";

void OnGrpcLog(gpr_log_func_args* args) {
  HandleGrpcLogLine(static_cast<int>(args->severity), args->file, args->line, args->message);
}

}  // namespace

void HandleGrpcLogLine(int severity, const char* file, int line, const char* message) {
  const char* base = file ? std::strrchr(file, '/') : nullptr;
  const char* where = base ? base + 1 : (file ? file : "?");
  switch (severity) {
    case GPR_LOG_SEVERITY_DEBUG: spdlog::debug("grpc: {} ({}:{})", message, where, line); break;
    case GPR_LOG_SEVERITY_INFO: spdlog::info("grpc: {} ({}:{})", message, where, line); break;
    default: spdlog::error("grpc: {} ({}:{})", message, where, line); break;
  }
  if (tls_acceptor.load(std::memory_order_relaxed) && std::strncmp(message, kAcceptorGaveUp,
                                                                   std::strlen(kAcceptorGaveUp)) == 0) {
    common::MarkNotLive(std::string("gRPC's acceptor on the TLS port stopped after '") + message +
                        "' and does not accept again (gRPC 1.51); restart the server");
  }
}

void RouteGrpcLogs(bool tls_listener) {
  tls_acceptor.store(tls_listener, std::memory_order_relaxed);
  gpr_set_log_function(OnGrpcLog);
}

}  // namespace ortserve::grpcfe

#pragma once
// What one HTTP server shares with its sessions and with the completion
// callbacks of requests in flight, so that a completion arriving after the
// server is gone finds a live (stopped) io_context and a closed gate rather
// than freed memory. Internal to src/server/http.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/common/RefusedConnections.h"
#include "server/http/ConnectionRegistry.h"
#include "server/http/IoThread.h"

namespace ortserve::http {

struct HttpServerCore {
  std::vector<std::unique_ptr<IoThread>> io_threads;
  std::mutex gate_mu;
  bool gate_open = true;  // guarded by gate_mu: completions may still be handed to connections
  ConnectionRegistry connections;
  common::RefusedConnections rejected_connections{"http", "--http-max-connections", "refused"};
  std::atomic<size_t> rejections_lingering{0};  // live ConnectionRejection objects
  // Headers the access policy checks; copied into each request (none: no policy).
  std::vector<std::string> auth_headers;
};

}  // namespace ortserve::http

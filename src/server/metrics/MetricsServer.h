#pragma once
// The Prometheus endpoint: a small HTTP/1.1 listener (Boost.Beast) of its own,
// on its own port, so that scrapes never queue behind inference traffic and
// the inference port's limits do not apply. GET (or HEAD) /metrics answers the
// collector's text; any other path is 404, any other method 405.
//
// Threads: one I/O thread ("metrics-io") runs every connection; rendering
// happens on it. Lifetime: Create() validates, Start() binds and starts the
// thread, Stop() (also run by the destructor) closes the port and every
// connection and joins the thread.
//
// Limits (docs/limits.md): at most max_connections connections are open at
// once (one more is closed at once, unanswered: the port's descriptors never
// crowd out the inference ports'); a connection that starts no request for
// idle_timeout, or takes longer than read_timeout to send one, is closed; an
// accept that fails (out of descriptors) pauses the loop
// (server/common/AcceptBackoff.h).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/Status.h"

namespace ortserve::metrics {

struct MetricsServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 8002;  // 0: any free port (see port())
  // Prometheus scrapes over one keep-alive connection; a few more cover
  // several scrapers and a person with curl.
  size_t max_connections = 64;
  std::chrono::seconds idle_timeout{30};
  std::chrono::seconds read_timeout{10};
};

class MetricsServer {
 public:
  // `render` produces the exposition text; it is called on the I/O thread.
  static Result<std::unique_ptr<MetricsServer>> Create(MetricsServerOptions options,
                                                       std::function<std::string()> render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // kUnavailable naming address, port and the OS error if it cannot listen.
  Status Start();
  uint16_t port() const;  // the bound port; 0 before Start()
  void Stop();            // idempotent
  // Connections closed at once because max_connections were open. Any thread.
  uint64_t RejectedConnections() const;

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortserve::metrics

#pragma once
// A plain-HTTP connection beyond max_connections. It is answered 503 at once,
// before its request is read (a server may answer before the request is
// complete), then whatever the client sends is read and dropped for a short
// while, within LingeringClose's bounds (LingeringClose.h says why).
// Internal to src/server/http.
#include <array>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "server/http/HttpServerCore.h"
#include "server/http/IoThread.h"
#include "server/http/LingeringClose.h"

namespace ortserve::http {

class ConnectionRejection : public std::enable_shared_from_this<ConnectionRejection> {
 public:
  // At most this many linger at once; beyond, connections are closed without
  // an answer, so a flood costs no more than this.
  static constexpr size_t kMaxLingering = 256;

  ConnectionRejection(std::shared_ptr<HttpServerCore> core, Socket socket,
                      std::shared_ptr<const std::string> response);
  ~ConnectionRejection();

  void Start();

 private:

  void Drain();
  void Close();

  std::shared_ptr<HttpServerCore> core_;
  Socket socket_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<const std::string> response_;
  std::array<char, 4096> sink_;
  size_t drained_ = 0;
};

}  // namespace ortserve::http

#pragma once
// Closes an I/O thread's connections whose deadline (idle, read or write
// timeout) has passed, checked by one timer every kTick, instead of Beast's
// per-operation timeouts: those arm and cancel a timer with every read and
// write and run a handler for each cancel, a visible part of what a small
// request costs. A timeout therefore fires up to kTick late. Internal to
// src/server/http.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "server/http/SessionBase.h"

namespace ortserve::http {

class ConnectionDeadlines {
 public:
  static constexpr std::chrono::milliseconds kTick{100};

  explicit ConnectionDeadlines(boost::asio::io_context& ioc) : timer_(ioc) {}

  // The io_context's thread only. The connection is checked until it closes.
  void Watch(std::weak_ptr<SessionBase> session);
  // The io_context's thread only: no more checks (the server is stopping).
  void Stop();

 private:
  void Arm();
  void Sweep(boost::system::error_code ec);

  boost::asio::steady_timer timer_;
  bool armed_ = false;
  bool stopped_ = false;
  std::vector<std::weak_ptr<SessionBase>> sessions_;
};

}  // namespace ortserve::http

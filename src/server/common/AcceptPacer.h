#pragma once
// AcceptBackoff on asio: the step an accept loop takes after each accept,
// for the HTTP and the metrics listeners alike. A pause is a timer on the
// acceptor's executor (never a sleep on its thread, which serves connections
// too); its lines go to the server log as warnings.
//
// Used on the acceptor's thread only. Cancel() (when the acceptor closes)
// ends a pause early without accepting again.
#include <spdlog/spdlog.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>
#include <optional>
#include <string>
#include <utility>

#include "server/common/AcceptBackoff.h"

namespace ortserve::common {

class AcceptPacer {
 public:
  AcceptPacer(const boost::asio::any_io_executor& executor, std::string listener,
              AcceptBackoffOptions options = {})
      : timer_(executor), backoff_(std::move(listener), options) {}

  // After an accept completed with `ec` (other than operation_aborted):
  // runs `accept_next` at once, or after a pause when accepting fails for
  // want of descriptors or memory.
  template <class AcceptNext>
  void Next(const boost::system::error_code& ec, AcceptNext&& accept_next) {
    if (!ec) {
      // The usual case costs a comparison: no clock, no call.
      if (backoff_.consecutive_failures() > 0) Log(backoff_.Succeeded(AcceptBackoff::Clock::now()));
      return accept_next();
    }
    const int error = ec.category() == boost::system::system_category() ? ec.value() : -1;
    AcceptBackoff::Step step = backoff_.Failed(error, ec.message(), AcceptBackoff::Clock::now());
    Log(step.log);
    if (step.pause.count() == 0) return accept_next();
    timer_.expires_after(step.pause);
    timer_.async_wait([next = std::forward<AcceptNext>(accept_next)](const boost::system::error_code& wait_ec) mutable {
      if (!wait_ec) next();
    });
  }

  void Cancel() { timer_.cancel(); }

 private:
  static void Log(const std::optional<std::string>& line) {
    if (line) spdlog::warn("{}", *line);
  }

  boost::asio::steady_timer timer_;
  AcceptBackoff backoff_;
};

}  // namespace ortserve::common

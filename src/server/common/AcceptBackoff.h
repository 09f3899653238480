#pragma once
// What an accept loop does after accept() fails, shared by the HTTP and the
// metrics listeners (server/common/AcceptPacer.h runs it on asio).
//
// A listening socket whose accept fails with EMFILE (the process is out of
// descriptors) stays readable: the connection waits in the backlog, so a loop
// that accepts again at once spins a core and, logging each failure, writes
// hundreds of thousands of lines a second. Here:
//   - an error of the process or the system (EMFILE, ENFILE, ENOBUFS, ENOMEM,
//     and anything not known to belong to one connection) pauses the loop:
//     first_pause, doubling while accepts keep failing, up to max_pause; a
//     successful accept starts it from first_pause again;
//   - an error of one connection (ECONNABORTED, EPROTO, a network error
//     accept(2) passes on) retries at once, as the next connection is fine;
//   - failures are counted, and at most one line is logged per log_interval,
//     with the count since the previous line.
// Pure policy over the times it is given (no clock, no sleeping): tests drive
// it with made-up times. Not thread-safe: one per accept loop, used on its
// acceptor's thread.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ortserve::common {

struct AcceptBackoffOptions {
  std::chrono::milliseconds first_pause{10};
  std::chrono::milliseconds max_pause{1000};
  std::chrono::seconds log_interval{10};
};

class AcceptBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  using Options = AcceptBackoffOptions;
  // What the loop does next.
  struct Step {
    std::chrono::milliseconds pause{0};  // zero: accept again at once
    std::optional<std::string> log;      // a warning to log now
  };

  // `listener` names the loop in its log lines ("http", "metrics").
  explicit AcceptBackoff(std::string listener, Options options = {});

  // After accept failed with `error` (an errno value; -1 when the error is
  // no errno) described by `what`, at `now`.
  Step Failed(int error, std::string_view what, Clock::time_point now);
  // After an accept succeeded at `now`. The line, if any, reports failures
  // not logged yet, within the same one-line-per-interval bound.
  std::optional<std::string> Succeeded(Clock::time_point now);

  // accept(2)'s errors that belong to the connection being accepted, not to
  // the process or the system.
  static bool IsPerConnectionError(int error);

  // Failed accepts since the last success.
  uint64_t consecutive_failures() const { return consecutive_failures_; }

 private:
  bool MayLog(Clock::time_point now) const;
  std::string TakeCountLine(std::string_view what, Clock::time_point now);

  const std::string listener_;
  const Options options_;
  std::chrono::milliseconds next_pause_;
  uint64_t consecutive_failures_ = 0;
  uint64_t unlogged_failures_ = 0;
  std::optional<Clock::time_point> last_log_;
  std::string last_error_;  // what the last failure said
};

}  // namespace ortserve::common

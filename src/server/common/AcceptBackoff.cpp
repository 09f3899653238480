#include "server/common/AcceptBackoff.h"

#include <algorithm>
#include <cerrno>

namespace ortserve::common {

AcceptBackoff::AcceptBackoff(std::string listener, Options options)
    : listener_(std::move(listener)), options_(options), next_pause_(options.first_pause) {}

bool AcceptBackoff::IsPerConnectionError(int error) {
  switch (error) {
    case ECONNABORTED:
    case EPROTO:
    case EPERM:  // a firewall rule refused this connection
    case EINTR:
    case EAGAIN:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
      return true;
    default:
      return false;
  }
}

bool AcceptBackoff::MayLog(Clock::time_point now) const {
  return !last_log_ || now - *last_log_ >= options_.log_interval;
}

std::string AcceptBackoff::TakeCountLine(std::string_view what, Clock::time_point now) {
  std::string line = listener_ + ": accept failed " + std::to_string(unlogged_failures_) + " time(s)" +
                     (last_log_ ? " since the last such line" : "") + ": " + std::string(what);
  unlogged_failures_ = 0;
  last_log_ = now;
  return line;
}

AcceptBackoff::Step AcceptBackoff::Failed(int error, std::string_view what, Clock::time_point now) {
  ++consecutive_failures_;
  ++unlogged_failures_;
  last_error_.assign(what);
  Step step;
  if (!IsPerConnectionError(error)) {
    step.pause = next_pause_;
    next_pause_ = std::min(next_pause_ * 2, options_.max_pause);
  }
  if (MayLog(now)) {
    std::string line = TakeCountLine(what, now);
    if (step.pause.count() > 0) {
      line += "; pausing accepts " + std::to_string(step.pause.count()) + " ms (pauses double up to " +
              std::to_string(options_.max_pause.count()) + " ms while accepts fail; next line in " +
              std::to_string(options_.log_interval.count()) + " s at the earliest)";
    }
    step.log = std::move(line);
  }
  return step;
}

std::optional<std::string> AcceptBackoff::Succeeded(Clock::time_point now) {
  next_pause_ = options_.first_pause;
  const bool recovered = consecutive_failures_ > 0;
  consecutive_failures_ = 0;
  if (!recovered || unlogged_failures_ == 0 || !MayLog(now)) return std::nullopt;
  return TakeCountLine(last_error_, now) + "; accepting again";
}

}  // namespace ortserve::common

#pragma once
// The adaptive batching window's forecast: whether another request is about
// to arrive, so that waiting can still grow a batch.
//
// Most traffic is closed-loop: a client sends its next request once it got
// the previous answer. So each request answered makes one arrival expected,
// and each arrival consumes one expectation. An expectation lasts only as long
// as clients take to come back -- a moving average of the time from an answer
// to the arrival it made expected, times kPatience, at least kMinPatience --
// so a client that left (or a warm-up, a retry storm that ended) costs a short
// wait once, not a whole max_queue_delay every time. The window's
// max_queue_delay still bounds every wait; a window that closes on
// expectations shows they were wrong, and they are dropped.
//
// Not thread-safe: the scheduler calls it under its mutex.
#include <cstdint>

#include "core/InferenceRequest.h"  // Clock

namespace ortserve {

class ArrivalForecast {
 public:
  // Expectations wait up to kPatience x the average return time.
  static constexpr int kPatience = 4;
  // Floor of that wait, so that the first expectations (no average yet) and
  // very fast clients still get a chance to come back.
  static constexpr Clock::duration kMinPatience = std::chrono::microseconds(200);

  // `cap`: most arrivals ever expected (max_batch_size x instances).
  explicit ArrivalForecast(uint64_t cap) : cap_(cap) {}

  // `requests` are being answered at `now`.
  void Answered(uint64_t requests, Clock::time_point now);
  // A request arrived at `now`.
  void Arrived(Clock::time_point now);
  // Whether an arrival is still expected at `now`; if so, until when.
  bool ExpectsMore(Clock::time_point now) const { return expected_ > 0 && now < ExpectUntil(); }
  Clock::time_point ExpectUntil() const { return last_answer_ + Patience(); }
  // A batch went because its window closed while arrivals were expected.
  void WindowClosed() { expected_ = 0; }

  uint64_t expected() const { return expected_; }

 private:
  Clock::duration Patience() const;

  uint64_t cap_;
  uint64_t expected_ = 0;
  Clock::time_point last_answer_{};
  Clock::duration average_return_{};  // zero: nobody came back yet
};

}  // namespace ortserve

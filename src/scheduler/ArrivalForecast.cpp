#include "scheduler/ArrivalForecast.h"

#include <algorithm>

namespace ortserve {

Clock::duration ArrivalForecast::Patience() const {
  return std::max<Clock::duration>(average_return_ * kPatience, kMinPatience);
}

void ArrivalForecast::Answered(uint64_t requests, Clock::time_point now) {
  if (!ExpectsMore(now)) expected_ = 0;  // stale expectations: those clients left
  expected_ = std::min(expected_ + requests, cap_);
  last_answer_ = now;
}

void ArrivalForecast::Arrived(Clock::time_point now) {
  if (expected_ == 0) return;
  --expected_;
  // 1/8 weight per sample: follows a change of clients within a few batches.
  const Clock::duration sample = std::max<Clock::duration>(now - last_answer_, Clock::duration::zero());
  average_return_ = average_return_ == Clock::duration::zero()
                        ? sample
                        : (average_return_ * 7 + sample) / 8;
}

}  // namespace ortserve

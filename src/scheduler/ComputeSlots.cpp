#include "scheduler/ComputeSlots.h"

#include <algorithm>

namespace ortserve {

ComputeSlots::ComputeSlots(int total) : total_(std::max(1, total)), available_(total_) {}

ComputeSlots::Lease::~Lease() {
  if (owner_) owner_->Release(count_);
}

ComputeSlots::Lease ComputeSlots::Acquire(int count) {
  count = std::clamp(count, 1, total_);
  MutexLock lock(mu_);
  const uint64_t ticket = next_ticket_++;
  while (ticket != serving_ticket_ || available_ < count) lock.Wait(cv_);
  available_ -= count;
  ++serving_ticket_;
  lock.Unlock();
  // The next ticket may fit in what is left.
  cv_.notify_all();
  return Lease(this, count);
}

std::optional<ComputeSlots::Lease> ComputeSlots::TryAcquire(int count) {
  count = std::clamp(count, 1, total_);
  MutexLock lock(mu_);
  if (next_ticket_ != serving_ticket_ || available_ < count) return std::nullopt;
  available_ -= count;
  ++next_ticket_;
  ++serving_ticket_;
  return Lease(this, count);
}

void ComputeSlots::Release(int count) {
  {
    MutexLock lock(mu_);
    available_ += count;
  }
  cv_.notify_all();
}

int ComputeSlots::available() const {
  MutexLock lock(mu_);
  return available_;
}

}  // namespace ortserve

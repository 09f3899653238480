#include "scheduler/ComputeSlots.h"

#include <algorithm>

namespace ortserve {

ComputeSlots::ComputeSlots(int total) : total_(std::max(1, total)), available_(total_) {}

ComputeSlots::Lease::~Lease() {
  if (owner_) owner_->Release(count_);
}

ComputeSlots::Lease ComputeSlots::Acquire(int count) {
  count = std::clamp(count, 1, total_);
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  cv_.wait(lock, [&] { return ticket == serving_ticket_ && available_ >= count; });
  available_ -= count;
  ++serving_ticket_;
  lock.unlock();
  // The next ticket may fit in what is left.
  cv_.notify_all();
  return Lease(this, count);
}

void ComputeSlots::Release(int count) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    available_ += count;
  }
  cv_.notify_all();
}

int ComputeSlots::available() const {
  std::lock_guard<std::mutex> lock(mu_);
  return available_;
}

}  // namespace ortserve

#pragma once
// A process-wide budget of compute threads shared by every model instance.
//
// Why: each instance owns an ORT session with its own intra-op threads, so a
// repository with more instances than cores would oversubscribe the machine
// when they all run at once (Triton's classic failure). Threads that exist but
// sleep cost nothing; threads that run at the same time do. So every worker
// leases as many slots as its instance runs threads before each execution,
// and the number of threads computing at once never exceeds the budget.
// Requests that wait for a slot keep accumulating in their queue, which makes
// the next batch larger rather than the machine slower.
//
// Leases are granted first come, first served (a worker wanting 4 slots is not
// starved by a stream of workers wanting 1). Thread-safe.
#include <condition_variable>
#include <cstdint>
#include <optional>

#include "core/Mutex.h"

namespace ortserve {

class ComputeSlots {
 public:
  explicit ComputeSlots(int total);
  ComputeSlots(const ComputeSlots&) = delete;
  ComputeSlots& operator=(const ComputeSlots&) = delete;

  // Returns the slots to the budget on destruction.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept : owner_(other.owner_), count_(other.count_) { other.owner_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();

   private:
    friend class ComputeSlots;
    Lease(ComputeSlots* owner, int count) : owner_(owner), count_(count) {}
    ComputeSlots* owner_ = nullptr;
    int count_ = 0;
  };

  // Blocks until `count` slots (clamped to 1..total) are free, in arrival order.
  Lease Acquire(int count);
  // `count` slots (clamped as Acquire's) now, or nullopt when they are not
  // free or another caller waits for slots (it keeps its turn). Never blocks.
  std::optional<Lease> TryAcquire(int count);

  int total() const { return total_; }
  int available() const;

 private:
  void Release(int count);

  const int total_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  int available_ ORTSERVE_GUARDED_BY(mu_);
  uint64_t next_ticket_ ORTSERVE_GUARDED_BY(mu_) = 0;     // handed to each Acquire
  uint64_t serving_ticket_ ORTSERVE_GUARDED_BY(mu_) = 0;  // the only ticket allowed to take slots
};

}  // namespace ortserve

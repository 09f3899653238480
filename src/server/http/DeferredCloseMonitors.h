#pragma once
// Arms the close monitors of requests still inside a model when the I/O
// thread runs out of work, or after a short delay while it stays busy.
// Arming a monitor costs a system call that finds nothing (asio tries every
// receive before it waits for readiness). When the thread is about to wait
// for events that is cheap, and the last chance to arm without a wake-up.
// While the thread stays busy (many small requests), a sweep every kDelay
// arms those in flight since before the previous sweep (one to two kDelay
// old): a small model's requests are answered before that and never pay for
// a monitor. A client that leaves is noticed that much later, which matters
// only for requests that run longer than that. No timer: RunIoThread calls
// it between handlers. Internal to src/server/http.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "server/http/SessionBase.h"

namespace ortserve::http {

class DeferredCloseMonitors {
 public:
  static constexpr std::chrono::milliseconds kDelay{1};

  // All: the io_context's thread only.
  bool Pending() const { return !arriving_.empty() || !waiting_.empty(); }

  void Add(std::weak_ptr<SessionBase> session, uint64_t request) {
    if (!Pending()) next_sweep_ = std::chrono::steady_clock::now() + kDelay;
    arriving_.push_back({std::move(session), request});
  }

  // Between two handlers while the thread is busy.
  void SweepIfDue() {
    if (++handlers_ % kHandlersPerClockRead != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_sweep_) return;
    ArmEntries(waiting_);
    waiting_.swap(arriving_);
    next_sweep_ = now + kDelay;
  }

  // When the thread has no ready handler left.
  void ArmAll() {
    ArmEntries(waiting_);
    ArmEntries(arriving_);
  }

 private:
  static constexpr uint32_t kHandlersPerClockRead = 8;

  struct Entry {
    std::weak_ptr<SessionBase> session;
    uint64_t request;  // the connection's request number (a later one may be in flight by the sweep)
  };

  static void ArmEntries(std::vector<Entry>& entries) {
    for (const Entry& e : entries)
      if (auto session = e.session.lock()) session->ArmCloseMonitor(e.request);
    entries.clear();  // keeps its capacity
  }

  std::vector<Entry> arriving_;  // since the last sweep
  std::vector<Entry> waiting_;   // armed by the next sweep
  std::chrono::steady_clock::time_point next_sweep_;
  uint32_t handlers_ = 0;
};

}  // namespace ortserve::http

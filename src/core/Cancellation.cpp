#include "core/Cancellation.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace ortserve {
namespace {

struct Subscribers {
  std::mutex mu;  // held while callbacks run: unsubscribing waits for them
  std::vector<CancelSubscription*> list;
};

Subscribers& TheSubscribers() {
  // Never destroyed: a connection torn down during exit may still cancel.
  static Subscribers* subscribers = new Subscribers;
  return *subscribers;
}

}  // namespace

void CancelToken::Cancel() {
  if (cancelled_.exchange(true, std::memory_order_relaxed)) return;
  Subscribers& s = TheSubscribers();
  std::lock_guard<std::mutex> lock(s.mu);
  for (CancelSubscription* subscription : s.list) subscription->on_cancel_();
}

CancelSubscription::CancelSubscription(std::function<void()> on_cancel) : on_cancel_(std::move(on_cancel)) {
  Subscribers& s = TheSubscribers();
  std::lock_guard<std::mutex> lock(s.mu);
  s.list.push_back(this);
}

CancelSubscription::~CancelSubscription() {
  Subscribers& s = TheSubscribers();
  std::lock_guard<std::mutex> lock(s.mu);
  s.list.erase(std::find(s.list.begin(), s.list.end(), this));
}

}  // namespace ortserve

#pragma once
// The client connections of one HTTP server: counted from the construction
// to the destruction of their session (the connection limit and the metrics
// read the count), and listed from their start so that Stop() can close
// every one. Thread-safe. Internal to src/server/http.
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "server/http/SessionBase.h"

namespace ortserve::http {

class ConnectionRegistry {
 public:
  // A session's constructor.
  void Opened() { open_.fetch_add(1, std::memory_order_relaxed); }
  // A session's start (a weak_ptr to it exists only once it is owned).
  void Register(SessionBase* session, std::weak_ptr<SessionBase> weak);
  // A session's destructor.
  void Closed(SessionBase* session);

  size_t open() const { return open_.load(std::memory_order_relaxed); }
  // The registered sessions still alive.
  std::vector<std::shared_ptr<SessionBase>> Live() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions_;  // guarded by mu_
  std::atomic<size_t> open_{0};
};

}  // namespace ortserve::http

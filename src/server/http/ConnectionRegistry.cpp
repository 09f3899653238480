#include "server/http/ConnectionRegistry.h"

namespace ortserve::http {

void ConnectionRegistry::Register(SessionBase* session, std::weak_ptr<SessionBase> weak) {
  std::lock_guard lock(mu_);
  sessions_.emplace(session, std::move(weak));
}

void ConnectionRegistry::Closed(SessionBase* session) {
  open_.fetch_sub(1, std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  sessions_.erase(session);
}

std::vector<std::shared_ptr<SessionBase>> ConnectionRegistry::Live() const {
  std::vector<std::shared_ptr<SessionBase>> live;
  std::lock_guard lock(mu_);
  for (const auto& [ptr, weak] : sessions_)
    if (auto session = weak.lock()) live.push_back(std::move(session));
  return live;
}

}  // namespace ortserve::http

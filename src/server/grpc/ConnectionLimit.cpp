#include "server/grpc/ConnectionLimit.h"

#include <utility>

namespace ortserve::grpcfe {

ConnectionLimit::ConnectionLimit(size_t max_connections, HandedOverConnections* connections)
    : max_(max_connections), connections_(connections) {}

bool ConnectionLimit::FullLocked(size_t pending) {
  if (pending + connections_->Remembered() < max_) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return true;
  next_check_ = now + kCheckInterval;
  return pending + connections_->Open() >= max_;
}

bool ConnectionLimit::Full(size_t pending) {
  std::lock_guard lock(mu_);
  return FullLocked(pending);
}

bool ConnectionLimit::Admit(int fd, std::string peer_ip) {
  {
    std::lock_guard lock(mu_);
    if (!FullLocked(0)) {
      connections_->Add(fd, std::move(peer_ip));
      return true;
    }
  }
  Refuse();
  return false;
}

}  // namespace ortserve::grpcfe

#include "server/grpc/HandedOverConnections.h"

#include <sys/stat.h>

#include <utility>

namespace ortserve::grpcfe {

bool HandedOverConnections::Names(int fd, const Identity& identity) {
  struct stat st {};
  return fstat(fd, &st) == 0 && st.st_dev == identity.dev && st.st_ino == identity.ino;
}

void HandedOverConnections::Add(int fd, std::string peer_ip) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return;  // not open: nothing to count
  std::lock_guard lock(mu_);
  fds_[fd] = Identity{st.st_dev, st.st_ino, std::move(peer_ip)};
}

std::optional<std::string> HandedOverConnections::PeerOf(int fd) const {
  std::lock_guard lock(mu_);
  auto it = fds_.find(fd);
  if (it == fds_.end() || !Names(fd, it->second)) return std::nullopt;
  return it->second.peer_ip;
}

size_t HandedOverConnections::Open() {
  std::lock_guard lock(mu_);
  for (auto it = fds_.begin(); it != fds_.end();) {
    it = Names(it->first, it->second) ? std::next(it) : fds_.erase(it);
  }
  return fds_.size();
}

size_t HandedOverConnections::Remembered() const {
  std::lock_guard lock(mu_);
  return fds_.size();
}

}  // namespace ortserve::grpcfe

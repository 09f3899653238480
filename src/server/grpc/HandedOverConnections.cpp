#include "server/grpc/HandedOverConnections.h"

#include <sys/stat.h>

namespace ortserve::grpcfe {

void HandedOverConnections::Add(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return;  // not open: nothing to count
  std::lock_guard lock(mu_);
  fds_[fd] = Identity{st.st_dev, st.st_ino};
}

size_t HandedOverConnections::Open() {
  std::lock_guard lock(mu_);
  for (auto it = fds_.begin(); it != fds_.end();) {
    struct stat st {};
    const bool same = fstat(it->first, &st) == 0 && st.st_dev == it->second.dev && st.st_ino == it->second.ino;
    it = same ? std::next(it) : fds_.erase(it);
  }
  return fds_.size();
}

size_t HandedOverConnections::Remembered() const {
  std::lock_guard lock(mu_);
  return fds_.size();
}

}  // namespace ortserve::grpcfe

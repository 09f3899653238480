#pragma once
// Thread names for ps, top, perf and /proc/<pid>/task/*/comm (the soak report
// groups CPU time by them). Linux keeps 15 characters; longer names are cut.
#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace ortserve {

inline void SetCurrentThreadName(std::string_view name) {
  char buffer[16];
  const size_t n = std::min(name.size(), sizeof(buffer) - 1);
  std::memcpy(buffer, name.data(), n);
  buffer[n] = '\0';
  pthread_setname_np(pthread_self(), buffer);
}

// Renames the calling thread for a scope, e.g. while it creates threads that
// inherit its name (ONNX Runtime's intra-op pool), then restores the name.
class ScopedThreadName {
 public:
  explicit ScopedThreadName(std::string_view name) {
    if (pthread_getname_np(pthread_self(), previous_, sizeof(previous_)) != 0) previous_[0] = '\0';
    SetCurrentThreadName(name);
  }
  ~ScopedThreadName() { SetCurrentThreadName(previous_); }
  ScopedThreadName(const ScopedThreadName&) = delete;
  ScopedThreadName& operator=(const ScopedThreadName&) = delete;

 private:
  char previous_[16];
};

}  // namespace ortserve

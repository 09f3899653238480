#pragma once
// The connections an endpoint refused because its connection limit was open
// (HTTP, gRPC, metrics): counted for ortserve_connections_rejected_total and
// logged at the first refusal and every 1000th, so that a flood of them
// cannot flood the log too.

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

namespace ortserve::common {

class RefusedConnections {
 public:
  // The log line reads "<endpoint>: <limit> open connections, the limit
  // (<flag>); <n> connection(s) <what> so far".
  RefusedConnections(std::string endpoint, std::string flag, std::string what)
      : endpoint_(std::move(endpoint)), flag_(std::move(flag)), what_(std::move(what)) {}

  // One more refused while `limit` connections were open. Any thread.
  void Count(size_t limit) {
    const uint64_t n = count_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (n == 1 || n % 1000 == 0) {
      spdlog::warn("{}: {} open connections, the limit ({}); {} connection(s) {} so far", endpoint_, limit, flag_, n,
                   what_);
    }
  }

  // Any thread.
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  const std::string endpoint_;
  const std::string flag_;
  const std::string what_;
  std::atomic<uint64_t> count_{0};
};

}  // namespace ortserve::common

#include "server/common/Liveness.h"

#include <atomic>
#include <mutex>

#include <spdlog/spdlog.h>

namespace ortserve::common {
namespace {

std::atomic<bool> not_live{false};
std::mutex reason_mu;
std::string first_reason;

}  // namespace

void MarkNotLive(const std::string& reason) {
  {
    std::lock_guard lock(reason_mu);
    if (not_live.load(std::memory_order_relaxed)) return;
    first_reason = reason;
    not_live.store(true, std::memory_order_release);
  }
  spdlog::error("server no longer live (/v2/health/live and ServerLive answer not live): {}", reason);
}

std::optional<std::string> NotLiveReason() {
  if (!not_live.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard lock(reason_mu);
  return first_reason;
}

void ResetLivenessForTesting() {
  std::lock_guard lock(reason_mu);
  first_reason.clear();
  not_live.store(false, std::memory_order_release);
}

}  // namespace ortserve::common

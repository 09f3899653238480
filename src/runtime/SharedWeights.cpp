#include "runtime/SharedWeights.h"

#include <spdlog/spdlog.h>

namespace ortserve {
namespace {

// Tensors below this stay in each session: sharing them saves less than
// the bookkeeping costs.
constexpr size_t kMinSharedBytes = 1024;

}  // namespace

const MappedInitializers* SharedWeights::InitializersFor(const std::string& model_path, const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  auto found = mapped_.find(model_path);
  if (found != mapped_.end()) return found->second.get();
  auto mapped = MappedInitializers::Map(model_path, kMinSharedBytes);
  if (!mapped.ok()) {
    spdlog::warn("{}: instances keep their own weights: {}", label, mapped.status().message());
    return mapped_.emplace(model_path, nullptr).first->second.get();
  }
  spdlog::info("{}: {} initializer(s), {} bytes, shared by the instances (mapped from {})", label,
               mapped.value()->count(), mapped.value()->bytes(), model_path);
  return mapped_.emplace(model_path, std::move(mapped).value()).first->second.get();
}

void SharedWeights::ReleaseResidentPages() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [path, mapped] : mapped_) {
    if (mapped) mapped->ReleaseResidentPages();
  }
}

}  // namespace ortserve

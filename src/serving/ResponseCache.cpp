#include "serving/ResponseCache.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>

namespace ortserve {
namespace {

// Bookkeeping an entry costs beyond its key and output bytes (list node,
// map node, tensor headers), so that many tiny entries still fill the cache.
constexpr uint64_t kEntryOverheadBytes = 256;

void AppendU64(std::string* out, uint64_t value) {
  char raw[sizeof value];
  std::memcpy(raw, &value, sizeof value);
  out->append(raw, sizeof raw);
}

void AppendText(std::string* out, const std::string& text) {
  AppendU64(out, text.size());
  out->append(text);
}

void AppendTensor(std::string* out, const Tensor& t) {
  AppendText(out, t.name);
  AppendU64(out, static_cast<uint64_t>(t.dtype));
  AppendU64(out, t.shape.size());
  for (int64_t dim : t.shape) AppendU64(out, static_cast<uint64_t>(dim));
  AppendU64(out, t.data.size());
  out->append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
}

// One buffer holding every output's bytes; the returned tensors view it.
std::vector<Tensor> CopyOutputs(const std::vector<Tensor>& outputs, uint64_t* bytes) {
  size_t total = 0;
  for (const Tensor& t : outputs) total += t.data.size();
  std::vector<std::byte> buffer(total);
  size_t offset = 0;
  for (const Tensor& t : outputs) {
    if (t.data.size() > 0) std::memcpy(buffer.data() + offset, t.data.data(), t.data.size());
    offset += t.data.size();
  }
  const TensorData whole = TensorData::FromVector(std::move(buffer));
  std::vector<Tensor> copies;
  copies.reserve(outputs.size());
  offset = 0;
  *bytes = total;
  for (const Tensor& t : outputs) {
    copies.push_back({t.name, t.dtype, t.shape, whole.Slice(offset, t.data.size())});
    offset += t.data.size();
    *bytes += t.name.size() + t.shape.size() * sizeof(int64_t);
  }
  return copies;
}

}  // namespace

ResponseCache::ResponseCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

uint64_t ResponseCache::NewOwnerId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

ResponseCacheKey ResponseCache::KeyOf(uint64_t owner, const InferenceRequest& request) {
  std::vector<const Tensor*> inputs;
  inputs.reserve(request.inputs.size());
  size_t size = 4 * sizeof(uint64_t);
  for (const Tensor& t : request.inputs) {
    inputs.push_back(&t);
    size += t.name.size() + t.data.size() + (4 + t.shape.size()) * sizeof(uint64_t);
  }
  for (const RequestedOutput& r : request.requested_outputs) size += r.name.size() + 2 * sizeof(uint64_t);
  std::sort(inputs.begin(), inputs.end(), [](const Tensor* a, const Tensor* b) { return a->name < b->name; });

  ResponseCacheKey key;
  key.bytes.reserve(size);
  AppendU64(&key.bytes, owner);
  AppendU64(&key.bytes, inputs.size());
  for (const Tensor* t : inputs) AppendTensor(&key.bytes, *t);
  // A padded request's length: two lengths padded to the same bucket may
  // pad to the same inputs, and their answers are cropped differently.
  AppendU64(&key.bytes, static_cast<uint64_t>(request.unpadded_length));
  AppendU64(&key.bytes, request.requested_outputs.size());
  for (const RequestedOutput& r : request.requested_outputs) {
    AppendText(&key.bytes, r.name);
    AppendU64(&key.bytes, r.classification);
  }
  key.hash = std::hash<std::string_view>{}(key.bytes);
  return key;
}

ResponseCache::Lru::iterator ResponseCache::Find(const ResponseCacheKey& key) {
  auto [first, last] = by_hash_.equal_range(key.hash);
  for (auto it = first; it != last; ++it) {
    if (it->second->key.bytes == key.bytes) return it->second;
  }
  return lru_.end();
}

std::optional<std::vector<Tensor>> ResponseCache::Lookup(const ResponseCacheKey& key) {
  MutexLock lock(mu_);
  auto it = Find(key);
  if (it == lru_.end()) {
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it);
  return it->outputs;
}

bool ResponseCache::Insert(const ResponseCacheKey& key, const std::vector<Tensor>& outputs) {
  Entry entry;
  entry.outputs = CopyOutputs(outputs, &entry.bytes);
  entry.bytes += key.bytes.size() + kEntryOverheadBytes;
  if (entry.bytes > capacity_bytes_) return false;
  uint64_t owner = 0;
  std::memcpy(&owner, key.bytes.data(), std::min(key.bytes.size(), sizeof owner));
  entry.owner = owner;
  entry.key = key;

  MutexLock lock(mu_);
  if (Find(key) != lru_.end()) return false;  // two misses of one request raced; the first stays
  while (used_bytes_ + entry.bytes > capacity_bytes_ && !lru_.empty()) {
    Unlink(std::prev(lru_.end()));
    lru_.pop_back();
    ++evictions_;
  }
  used_bytes_ += entry.bytes;
  ++insertions_;
  lru_.push_front(std::move(entry));
  by_hash_.emplace(lru_.front().key.hash, lru_.begin());
  return true;
}

void ResponseCache::Unlink(Lru::iterator it) {
  auto [first, last] = by_hash_.equal_range(it->key.hash);
  for (auto m = first; m != last; ++m) {
    if (m->second == it) {
      by_hash_.erase(m);
      break;
    }
  }
  used_bytes_ -= it->bytes;
}

void ResponseCache::DropOwner(uint64_t owner) {
  Lru dropped;  // declared before the lock: freed after it is released
  MutexLock lock(mu_);
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (it->owner == owner) {
      Unlink(it);
      dropped.splice(dropped.end(), lru_, it);
    }
    it = next;
  }
}

ResponseCacheUsage ResponseCache::Usage() const {
  MutexLock lock(mu_);
  return {capacity_bytes_, used_bytes_, lru_.size(), insertions_, evictions_, hits_, misses_};
}

}  // namespace ortserve

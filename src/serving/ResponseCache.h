#pragma once
// Triton's response cache ("local"): one process-wide cache of successful
// answers, shared by every model that opts in with
// `response_cache { enable: true }`, bounded by bytes (`--cache-config
// local,size=BYTES`) with least-recently-used eviction.
//
// Contracts:
// - A key is the model version's owner id (one per ServedModel, so a
//   reloaded or replaced version never finds the answers of the one before),
//   every input (name, data type, shape and bytes, sorted by name) and the
//   requested outputs in order (with their classification counts). Keys are compared whole, not only by hash:
//   a hit is always an answer to the same request.
// - Insert copies the outputs into one buffer the entry owns, so an entry
//   never keeps a batch's output (or a request body) alive and its bytes are
//   what is counted against the capacity. An entry larger than the capacity
//   is not stored.
// - Lookup hands out the entry's tensors by shared ownership: an entry
//   evicted while its answer is being written stays alive until then.
// - Errors are never cached: only ServedModel::Complete inserts, and only
//   successful answers.
// Thread-safe; one lock, held for map and list updates only (keys are built
// and outputs copied outside it).
#include <cstdint>
#include <list>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/ModelStatistics.h"
#include "core/Mutex.h"

namespace ortserve {

class ResponseCache {
 public:
  explicit ResponseCache(uint64_t capacity_bytes);

  // A new owner id for a model version's entries.
  static uint64_t NewOwnerId();
  // The key of an admitted request of the version `owner`.
  static ResponseCacheKey KeyOf(uint64_t owner, const InferenceRequest& request);

  // The cached outputs for `key` (and marks the entry most recently used).
  std::optional<std::vector<Tensor>> Lookup(const ResponseCacheKey& key) ORTSERVE_EXCLUDES(mu_);
  // Stores a copy of `outputs` under `key`, evicting the least recently used
  // entries to make room. False when the entry alone exceeds the capacity
  // (nothing is evicted then) or the key is already present.
  bool Insert(const ResponseCacheKey& key, const std::vector<Tensor>& outputs) ORTSERVE_EXCLUDES(mu_);
  // Drops every entry of `owner` (its version is unloaded or replaced).
  void DropOwner(uint64_t owner) ORTSERVE_EXCLUDES(mu_);

  ResponseCacheUsage Usage() const ORTSERVE_EXCLUDES(mu_);

 private:
  struct Entry {
    uint64_t owner = 0;
    ResponseCacheKey key;
    std::vector<Tensor> outputs;  // views into one buffer the entry owns
    uint64_t bytes = 0;           // what the entry counts against the capacity
  };
  using Lru = std::list<Entry>;  // front: most recently used

  // The entry of `key`, or end().
  Lru::iterator Find(const ResponseCacheKey& key) ORTSERVE_REQUIRES(mu_);
  // Takes the entry out of the index and the byte count; the caller removes
  // it from the list.
  void Unlink(Lru::iterator it) ORTSERVE_REQUIRES(mu_);

  const uint64_t capacity_bytes_;
  mutable Mutex mu_;
  Lru lru_ ORTSERVE_GUARDED_BY(mu_);
  std::unordered_multimap<uint64_t, Lru::iterator> by_hash_ ORTSERVE_GUARDED_BY(mu_);
  uint64_t used_bytes_ ORTSERVE_GUARDED_BY(mu_) = 0;
  uint64_t insertions_ ORTSERVE_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ORTSERVE_GUARDED_BY(mu_) = 0;
  uint64_t hits_ ORTSERVE_GUARDED_BY(mu_) = 0;
  uint64_t misses_ ORTSERVE_GUARDED_BY(mu_) = 0;
};

}  // namespace ortserve

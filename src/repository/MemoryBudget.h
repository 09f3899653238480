#pragma once
// The model memory budget (--model-memory-budget): what a loaded model
// costs, and which loaded models are unloaded to make room for a load.
// Pure logic, no locks and no clocks: the loader (ModelLoader) gathers the
// facts (ResidentModel) and carries the plan out.
//
// The unit of eviction is a model, all its loaded versions together: an
// on-demand reload loads a model as a whole (it is needed only when no
// version is READY), so evicting one version of several would leave it
// unreachable until the model's next load.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/Status.h"

namespace ortserve {

// One loaded model as the eviction policy sees it.
struct ResidentModel {
  std::string name;
  uint64_t bytes = 0;          // resident cost, all its loaded versions
  int64_t last_used_ns = 0;    // latest request arrival (any clock, compared only)
  uint64_t requests = 0;       // queued or running now
  uint64_t open_sequences = 0; // sequences holding a slot (sequence batcher)
  bool pinned = false;         // parameter pinned "true", or named by --load-model
  bool loading = false;        // part of the load that needs the room
  std::string ensemble_in_use; // a loaded ensemble composing it, in use now ("" none)
};

// Why `m` may not be evicted ("" when it may): "pinned", "3 requests
// queued or running", "2 open sequences", "composing model of ensemble 'e'
// in use", "being loaded".
std::string EvictionHold(const ResidentModel& m);

// The models to evict, least recently used first, so that a load needing
// `need` bytes fits in `budget` beside what `resident` holds. Empty when it
// fits already. kUnavailable when it cannot fit: the load alone exceeds the
// budget, or evicting every evictable model is not enough -- the message
// names the budget, what the load needs and what holds the rest, as
//   "model memory budget 64 MiB exhausted: loading 'c' needs 20 MiB, 60 MiB
//    held by a (20 MiB, 3 requests queued or running), b (40 MiB, pinned)".
// `budget` 0: no budget (never evicts).
Result<std::vector<std::string>> PlanEviction(uint64_t budget, const std::string& loading, uint64_t need,
                                              const std::vector<ResidentModel>& resident);

// Bytes as people read them: "512 B", "20 KiB", "64 MiB", "1.5 GiB".
std::string FormatBytes(uint64_t bytes);

// --model-memory-budget: a byte count with an optional K, M or G suffix
// (KiB, MiB, GiB: powers of 1024; "KiB"/"KB"/"k" spellings too). "0": none.
Result<uint64_t> ParseByteSize(const std::string& text);

// The resident cost of one version before it loads, from its files: the
// bytes of its version folder (model file and external weights) times
// kResidentFileFactor, plus kResidentVersionOverhead per version (session,
// arenas, the scheduler's threads). An ensemble (no files) costs nothing.
// docs/many-models.md gives the measurements behind the constants.
inline constexpr uint64_t kResidentVersionOverhead = 384 * 1024;
inline constexpr double kResidentFileFactor = 1.25;
uint64_t EstimateResidentBytes(const std::filesystem::path& version_dir, bool ensemble);

}  // namespace ortserve

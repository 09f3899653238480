#pragma once
// The optimized-model cache (--model-cache-dir): a CPU session's graph after
// ORT's optimizations is saved on its first load (SetOptimizedModelFilePath)
// and later loads read the saved graph with optimizations off, which skips
// the optimization passes (docs/decisions.md, "Optimized-model cache").
//
// An entry is <dir>/<model>-<key>.onnx plus <model>-<key>.sha256, the
// checksum of the saved file. The key hashes everything that changes the
// optimized graph: the model's bytes and every other file of its directory
// (external data), the ORT version, the optimization level, the providers,
// the custom-operator libraries' paths, and the CPU's feature flags (level
// "all" saves layout transforms such as
// NCHWc that are specific to the CPU). An entry whose checksum does not
// match, or that ORT cannot load, is removed with a warning and rebuilt;
// the cache never fails a load. Internal to the runtime layer.
#include <string>

#include "core/Status.h"
#include "runtime/RuntimeOptions.h"

namespace ortserve {

class OptimizedModelEntry {
 public:
  // The entry for `options` in options.optimized_model_cache_dir; kInternal
  // when the directory or the model's files cannot be read (the caller then
  // loads without the cache).
  static Result<OptimizedModelEntry> Find(const RuntimeOptions& options);

  // A saved graph whose checksum matches (a mismatch removes the entry and
  // warns).
  bool Usable() const;
  const std::string& path() const { return path_; }
  // Where the session that builds the entry saves its graph.
  const std::string& staging_path() const { return staging_path_; }
  // Moves a saved graph into place with its checksum; false (warned) when
  // that fails. Removes the staging file either way.
  bool Commit() const;
  // Removes the entry (ORT could not load it) and warns with `why`.
  void Discard(const std::string& why) const;
  // Removes a staging file left by a failed save.
  void DropStaging() const;

 private:
  std::string label_;
  std::string dir_;
  std::string path_;
  std::string checksum_path_;
  std::string staging_path_;
};

}  // namespace ortserve

#include "server/common/StatisticsSnapshot.h"

#include <algorithm>

namespace ortserve::common {
namespace {

DurationTotals Totals(const DurationStat& stat) {
  return {stat.count.load(std::memory_order_relaxed), stat.ns.load(std::memory_order_relaxed)};
}

}  // namespace

void AlignComputeCounts(std::span<DurationTotals, 3> compute) {
  uint64_t reached = compute[0].count;
  for (const DurationTotals& d : compute) reached = std::min(reached, d.count);
  for (DurationTotals& d : compute) d.count = reached;
}

ModelStatisticsSnapshot SnapshotStatistics(Model& model) {
  const ModelStatistics& stats = model.stats();
  ModelStatisticsSnapshot s;
  s.name = model.name();
  s.version = model.version();
  s.last_inference_ms = stats.last_inference_ms.load(std::memory_order_relaxed);
  s.inference_count = stats.inference_count.load(std::memory_order_relaxed);
  s.execution_count = stats.execution_count.load(std::memory_order_relaxed);
  // Order of kInferenceDurationNames.
  s.inference = {Totals(stats.success),       Totals(stats.fail),
                 Totals(stats.queue),         Totals(stats.compute_input),
                 Totals(stats.compute_infer), Totals(stats.compute_output),
                 Totals(stats.cache_hit),     Totals(stats.cache_miss)};
  AlignComputeCounts(std::span<DurationTotals, 3>(s.inference.data() + kComputeInputIndex, 3));
  for (size_t size = 1; size <= stats.MaxTrackedBatchSize(); ++size) {
    const BatchStat& batch = stats.BatchStatAt(size);
    if (batch.compute_infer.count.load(std::memory_order_relaxed) == 0) continue;
    // Order of kBatchDurationNames.
    s.batches.push_back({size, {Totals(batch.compute_input), Totals(batch.compute_infer),
                                Totals(batch.compute_output)}});
    AlignComputeCounts(s.batches.back().durations);
  }
  return s;
}

Result<std::vector<ModelStatisticsSnapshot>> SnapshotStatistics(const ModelRepository& repository,
                                                                const std::string& name,
                                                                const std::string& version) {
  std::vector<ModelStatisticsSnapshot> snapshots;
  if (!name.empty() && !version.empty()) {
    Result<std::shared_ptr<Model>> found = repository.GetModel(name, version);
    if (!found.ok()) {
      // As Triton: a version of a model it knows that is not ready has no
      // statistics; a model name it does not know keeps GetModel's answer.
      Result<bool> known = IsModelVersionReady(repository, name, version);
      return known.ok() ? VersionNotAvailableError(name, found.status()) : found.status();
    }
    snapshots.push_back(SnapshotStatistics(*found.value()));
    return snapshots;
  }
  for (const std::shared_ptr<Model>& model : repository.ReadyModels()) {
    if (name.empty() || model->name() == name) snapshots.push_back(SnapshotStatistics(*model));
  }
  if (!name.empty() && snapshots.empty()) {
    // Either an error (unknown, not ready), or the model became ready since.
    Result<std::shared_ptr<Model>> found = repository.GetModel(name, "");
    if (!found.ok()) return found.status();
    snapshots.push_back(SnapshotStatistics(*found.value()));
  }
  return snapshots;
}

}  // namespace ortserve::common

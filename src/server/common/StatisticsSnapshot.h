#pragma once
// What the statistics endpoints answer (Triton's statistics extension), read
// once from the repository's counters into plain values. The HTTP front end
// renders it as JSON and the gRPC front end as protobuf, both by the field
// names below, so the two protocols report the same models, the same fields
// and the same batch sizes.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"
#include "repository/ModelRepository.h"

namespace ortserve::common {

struct DurationTotals {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// Field names of Triton's InferStatistics, in its order; the wire name of
// ModelStatisticsSnapshot::inference[i] is kInferenceDurationNames[i].
inline constexpr std::array<std::string_view, 8> kInferenceDurationNames = {
    "success",        "fail",      "queue",     "compute_input", "compute_infer",
    "compute_output", "cache_hit", "cache_miss"};
// Where compute_input, _infer and _output sit in kInferenceDurationNames.
inline constexpr size_t kComputeInputIndex = 3;
static_assert(kInferenceDurationNames[kComputeInputIndex] == "compute_input" &&
              kInferenceDurationNames[kComputeInputIndex + 2] == "compute_output");
// Field names of Triton's InferBatchStatistics durations, likewise.
inline constexpr std::array<std::string_view, 3> kBatchDurationNames = {
    "compute_input", "compute_infer", "compute_output"};

struct BatchStatisticsSnapshot {
  uint64_t batch_size = 0;
  std::array<DurationTotals, kBatchDurationNames.size()> durations;
};

struct ModelStatisticsSnapshot {
  std::string name;
  std::string version;
  uint64_t last_inference_ms = 0;  // since the epoch
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  std::array<DurationTotals, kInferenceDurationNames.size()> inference;
  // As Triton: only the batch sizes that were executed at least once.
  std::vector<BatchStatisticsSnapshot> batches;
};

// Every successful request adds the same count to compute_input, _infer and
// _output (the scheduler, once per batch), but they are three atomics, so a
// snapshot can land between the adds and see them differ. perf_analyzer
// aborts on differing compute counts ("Server side statistics compute counts
// must be the same"), so a snapshot reports for all three the count all three
// have reached. The counters only grow, so that figure does too; the
// durations are read as they are (at most one batch ahead of the count).
void AlignComputeCounts(std::span<DurationTotals, 3> compute);

// The statistics of the models a request selects, as Triton selects them:
// `name` empty: every ready version of every model; `version` named: that
// version; otherwise every ready version of `name`, and GetModel's error
// (unknown, not ready) when it has none.
Result<std::vector<ModelStatisticsSnapshot>> SnapshotStatistics(const ModelRepository& repository,
                                                                const std::string& name,
                                                                const std::string& version);

ModelStatisticsSnapshot SnapshotStatistics(Model& model);

}  // namespace ortserve::common

#pragma once
// JSON documents of the KServe v2 / Triton metadata, configuration,
// statistics and repository endpoints. Pure functions over the repository's
// types, so each is testable without a server.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"
#include "repository/ModelRepository.h"
#include "server/common/ModelMetadata.h"
#include "server/common/StatisticsSnapshot.h"

namespace ortserve::http {

// GET /v2: {"name":"ortserve","version":...,"extensions":[...]}
std::string ServerMetadataJson(const common::ServerMetadata& metadata);

// GET /v2/models/{m}[/versions/{v}]: name, versions, platform, inputs and
// outputs (shapes with the batch dimension, see common::DescribeModel).
std::string ModelMetadataJson(const common::ModelMetadata& metadata);

// GET .../config: Triton's JSON form of ModelConfig — protobuf's JSON mapping
// with proto field names and default values printed, but 64-bit integers as
// JSON numbers (protobuf writes them as strings; Triton converts them back,
// and perf_analyzer reads e.g. dims with GetInt64).
Result<std::string> ModelConfigJson(const inference::ModelConfig& config);

// GET .../stats and /v2/models/stats: {"model_stats":[...]} in Triton's
// statistics-extension layout.
std::string ModelStatsJson(const std::vector<common::ModelStatisticsSnapshot>& models);

// POST /v2/repository/index: [{"name","version","state","reason"?}].
std::string RepositoryIndexJson(const std::vector<ModelIndexEntry>& entries, bool ready_only);

// GET /v2/models/{m}/rollout: {"model","state","stable","candidate","weight",
// "step","steps","reason","steps_finished":[...],"current_step":{...}|null,
// "events":{...}} (docs/model-config.md, "Progressive rollout").
std::string RolloutJson(const RolloutStatus& status);

}  // namespace ortserve::http

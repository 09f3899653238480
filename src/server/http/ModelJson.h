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

namespace ortserve::http {

// GET /v2: {"name":"ortserve","version":...,"extensions":[...]}
std::string ServerMetadataJson(std::string_view version);

// GET /v2/models/{m}[/versions/{v}]: name, versions, platform, inputs and
// outputs with the batch dimension (-1) prepended when max_batch_size > 0.
std::string ModelMetadataJson(const Model& model, const std::vector<std::string>& versions);

// GET .../config: Triton's JSON form of ModelConfig — protobuf's JSON mapping
// with proto field names and default values printed, but 64-bit integers as
// JSON numbers (protobuf writes them as strings; Triton converts them back,
// and perf_analyzer reads e.g. dims with GetInt64).
Result<std::string> ModelConfigJson(const inference::ModelConfig& config);

// GET .../stats and /v2/models/stats: {"model_stats":[...]} in Triton's
// statistics-extension layout. Batch sizes that never ran are omitted.
std::string ModelStatsJson(const std::vector<std::shared_ptr<Model>>& models);

// POST /v2/repository/index: [{"name","version","state","reason"?}].
std::string RepositoryIndexJson(const std::vector<ModelIndexEntry>& entries, bool ready_only);

}  // namespace ortserve::http

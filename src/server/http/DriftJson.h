#pragma once
// GET /v2/models/{m}[/versions/{v}]/drift (docs/model-config.md, "Input
// drift statistics"): the drift statistics of a model's ready versions.
#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"
#include "serving/Model.h"

namespace ortserve::http {

// The versions among `models` that have drift statistics (Model::drift).
// {"model":m,"versions":[{"version","recording","baseline_requests",
// "requests","observed_requests","sample_fraction",
// "inputs":[{"name","count","mean","variance","histogram",
// "reference":{"count","mean","variance","edges","histogram"}|null,
// "psi":x|null}]}]}
std::string DriftJson(const std::string& model, const std::vector<std::shared_ptr<Model>>& models);

// The drift profile (serving/InputDrift.h) of the newest of `models` with
// drift statistics; kInvalidArgument while it still records its reference.
Result<std::string> DriftProfileText(const std::vector<std::shared_ptr<Model>>& models);

}  // namespace ortserve::http

#pragma once
// GET /v2/models/{m}/shadow (docs/model-config.md, "Shadow comparison"): the
// shadow comparison of a model's ready serving versions.
#include <memory>
#include <string>
#include <vector>

#include "serving/Model.h"

namespace ortserve::http {

// The versions among `models` that shadow their requests (Model::shadow).
// {"model":m,"versions":[{"version","shadow_version","fraction","tolerance",
// "compared","dropped","failed","last_failure","outputs":[{"name",
// "mismatches","max_abs_difference","max_rel_difference",
// "top1_agreement":x|null,"top1_rows","last_mismatch"}]}]}
std::string ShadowJson(const std::string& model, const std::vector<std::shared_ptr<Model>>& models);

}  // namespace ortserve::http

#include "repository/RepositoryCheck.h"

#include <algorithm>
#include <map>

#include "config/ConfigParse.h"
#include "repository/ModelBuilder.h"
#include "repository/ModelDirectory.h"
#include "repository/PreparedOrder.h"
#include "repository/ThreadPlan.h"

namespace ortserve {
namespace {

PreparedModel Prepare(const RepositoryOptions& options, const std::string& name) {
  return PrepareModel(options.repository_path, name, options.auto_complete, options.op_libraries,
                      options.session_config_entries, options.signing);
}

// The startup set: every model directory, or --load-model's in explicit mode
// (a name without a directory fails as it does at startup).
std::vector<PreparedModel> PrepareStartupModels(const RepositoryOptions& options) {
  const std::vector<std::string> names = ListModelDirs(options.repository_path);
  const auto& wanted = options.startup_models;
  const bool all = options.control_mode != ModelControlMode::kExplicit ||
                   std::find(wanted.begin(), wanted.end(), "*") != wanted.end();
  std::vector<PreparedModel> prepared;
  for (const std::string& name : all ? names : wanted) {
    if (!all && std::find(names.begin(), names.end(), name) == names.end()) {
      PreparedModel missing;
      missing.name = name;
      missing.failure = "--load-model names it but the model repository has no directory '" + name + "'";
      prepared.push_back(std::move(missing));
      continue;
    }
    prepared.push_back(Prepare(options, name));
  }
  return prepared;
}

// `name`'s version `version` (-1 or 0: the newest) and its config among
// the verdicts so far; null when it would not load.
const std::pair<int64_t, inference::ModelConfig>* WouldLoadVersion(const std::map<std::string, ModelVerdict>& done,
                                                                   const std::string& name, int64_t version) {
  auto it = done.find(name);
  if (it == done.end() || it->second.versions.empty()) return nullptr;
  const auto& versions = it->second.versions;
  if (version <= 0) {
    return &*std::max_element(versions.begin(), versions.end(),
                              [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  for (const auto& entry : versions)
    if (entry.first == version) return &entry;
  return nullptr;
}

const inference::ModelConfig* WouldLoad(const std::map<std::string, ModelVerdict>& done, const std::string& name,
                                        int64_t version) {
  const auto* found = WouldLoadVersion(done, name, version);
  return found ? &found->second : nullptr;
}

// The models a reference_model "model:<name>" may name: those that would load.
FindReferencedModel WouldLoadReferences(const std::map<std::string, ModelVerdict>& done) {
  return [&done](const std::string& name, int64_t version) -> std::optional<ReferencedModel> {
    const auto* found = WouldLoadVersion(done, name, version);
    if (!found) return std::nullopt;
    return ReferencedModel{found->second, found->first};
  };
}

Status CheckCandidate(const Candidate& c, const std::map<std::string, ModelVerdict>& done) {
  const std::string fallback = FallbackModelName(c.config);
  ORTSERVE_RETURN_IF_ERROR(CheckFallback(c, fallback.empty() ? nullptr : WouldLoad(done, fallback, -1)));
  ORTSERVE_RETURN_IF_ERROR(CheckResponseCacheUse(c));
  ORTSERVE_RETURN_IF_ERROR(CheckReferencedModel(c, WouldLoadReferences(done)));
  if (!c.config.has_ensemble_scheduling()) return Status::Ok();
  return CheckEnsembleSteps(
      c, [&](const EnsembleStep& step) { return WouldLoad(done, step.model_name, step.model_version); });
}

// --load: creates the candidate's sessions and runs its warm-up, on a plan
// of its own (the check serves nothing, so no thread budget is shared).
Status CheckCandidateSessions(const Candidate& c, const RepositoryOptions& options,
                              const std::map<std::string, ModelVerdict>& done) {
  if (IsEnsemble(c.config)) return Status::Ok();
  const ThreadPlan plan = ThreadPlan::Compute(options.thread_budget, {PlanRequest(c)}, /*shared_pool=*/false);
  return CheckSessions(c, plan.entries.front(), WouldLoadReferences(done));
}

}  // namespace

std::vector<ModelVerdict> CheckRepository(const RepositoryOptions& options, CheckDepth depth) {
  std::vector<PreparedModel> prepared = PrepareStartupModels(options);
  AddComposingModelsOf(prepared, options.repository_path,
                       [&options](const std::string& name) { return Prepare(options, name); });
  FallbacksFirst(prepared);
  FailEnsembleCycles(prepared);
  FailReferenceCycles(prepared);
  DependentsLast(prepared);
  std::map<std::string, ModelVerdict> done;
  std::vector<ModelVerdict> verdicts;
  for (const PreparedModel& p : prepared) {
    ModelVerdict v;
    v.name = p.name;
    if (!p.failure.empty()) v.errors.push_back(p.failure);
    for (const auto& [version, why] : p.version_failures)
      v.errors.push_back("version " + std::to_string(version) + ": " + why);
    for (const Candidate& c : p.candidates) {
      Status st = CheckCandidate(c, done);
      if (st.ok() && depth == CheckDepth::kSessions) st = CheckCandidateSessions(c, options, done);
      if (!st.ok()) {
        v.errors.push_back("version " + std::to_string(c.version) + ": " + st.message());
        continue;
      }
      v.versions.emplace_back(c.version, c.config);
    }
    done[v.name] = v;
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

}  // namespace ortserve

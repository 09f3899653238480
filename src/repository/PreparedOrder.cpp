#include "repository/PreparedOrder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "config/ConfigParse.h"
#include "config/ReferenceConfig.h"

namespace ortserve {

namespace fs = std::filesystem;

// The models an ensemble's steps name (none for another model).
std::set<std::string> ComposingModels(const PreparedModel& p) {
  std::set<std::string> names;
  for (const auto& c : p.candidates) {
    for (const auto& step : c.config.ensemble_scheduling().step()) names.insert(step.model_name());
  }
  return names;
}

std::string ReferencedModelOf(const PreparedModel& p) {
  for (const auto& c : p.candidates) {
    if (c.reference && !c.reference->model_name.empty()) return c.reference->model_name;
  }
  return "";
}

std::set<std::string> Dependencies(const PreparedModel& p) {
  std::set<std::string> names = ComposingModels(p);
  if (std::string referenced = ReferencedModelOf(p); !referenced.empty()) names.insert(referenced);
  return names;
}

// Ensembles load after the models their steps name (ensembles of ensembles
// after theirs), since an ensemble is checked against them when it loads;
// so does a model after the model its reference_model names.
void DependentsLast(std::vector<PreparedModel>& prepared) {
  std::map<std::string, const PreparedModel*> by_name;
  for (const auto& p : prepared) by_name[p.name] = &p;
  std::map<std::string, int> depth;
  std::function<int(const std::string&, int)> depth_of = [&](const std::string& name, int guard) -> int {
    auto known = depth.find(name);
    if (known != depth.end()) return known->second;
    auto p = by_name.find(name);
    if (p == by_name.end() || guard > static_cast<int>(prepared.size())) return 0;  // not loading now, or a cycle
    int d = 0;
    for (const auto& step : Dependencies(*p->second)) d = std::max(d, 1 + depth_of(step, guard + 1));
    return depth[name] = d;
  };
  for (const auto& p : prepared) depth_of(p.name, 0);
  std::stable_sort(prepared.begin(), prepared.end(),
                   [&](const PreparedModel& a, const PreparedModel& b) { return depth[a.name] < depth[b.name]; });
}

// An ensemble whose steps lead back to it through other ensembles never
// loads; each ensemble on such a cycle fails in Triton's words, naming the
// ensemble it depends on that leads back.
void FailEnsembleCycles(std::vector<PreparedModel>& prepared) {
  std::map<std::string, std::set<std::string>> steps;
  for (const auto& p : prepared) steps[p.name] = ComposingModels(p);
  for (auto& p : prepared) {
    std::set<std::string> seen;
    std::string back;  // the last ensemble before the cycle returns to p
    std::function<bool(const std::string&)> returns = [&](const std::string& from) {
      auto next = steps.find(from);
      if (next == steps.end()) return false;
      for (const auto& step : next->second) {
        if (step == p.name && from != p.name) {
          back = from;
          return true;
        }
        if (step != p.name && seen.insert(step).second && returns(step)) return true;
      }
      return false;
    };
    if (!returns(p.name)) continue;
    p.failure = "circular dependency between ensembles: " + p.name + " -> ... -> " + back + " -> " + p.name;
    p.candidates.clear();
    p.version_failures.clear();
  }
}

// A model whose reference_model chain leads back to it never loads (each
// waits for the other to be READY): each model on the cycle fails, naming it.
void FailReferenceCycles(std::vector<PreparedModel>& prepared) {
  std::map<std::string, std::string> references;
  for (const auto& p : prepared) references[p.name] = ReferencedModelOf(p);
  for (auto& p : prepared) {
    std::string chain = p.name, next = references[p.name];
    std::set<std::string> seen = {p.name};
    while (!next.empty() && next != p.name && seen.insert(next).second) {
      chain += " -> " + next;
      auto it = references.find(next);
      next = it == references.end() ? "" : it->second;
    }
    if (next != p.name) continue;
    p.failure = std::string("parameter '") + kReferenceModelParameter + "': circular reference between models: " +
                chain + " -> " + p.name;
    p.candidates.clear();
    p.version_failures.clear();
  }
}

// Fallback models load before the models that name them, so that a
// primary's load can check its fallback's inputs and outputs.
void FallbacksFirst(std::vector<PreparedModel>& prepared) {
  std::set<std::string> fallbacks;
  for (const auto& p : prepared)
    for (const auto& c : p.candidates)
      if (auto f = FallbackModelName(c.config); !f.empty()) fallbacks.insert(f);
  std::stable_partition(prepared.begin(), prepared.end(),
                        [&](const PreparedModel& p) { return fallbacks.count(p.name) > 0; });
}

void AddComposingModelsOf(std::vector<PreparedModel>& prepared, const std::string& repository,
                          const std::function<PreparedModel(const std::string&)>& prepare) {
  std::set<std::string> known;
  for (const auto& p : prepared) known.insert(p.name);
  for (size_t i = 0; i < prepared.size(); ++i) {  // grows: composing models of composing ensembles too
    for (const std::string& step : ComposingModels(prepared[i])) {
      std::error_code ec;
      if (known.count(step) || !fs::is_directory(fs::path(repository) / step, ec)) continue;
      spdlog::info("model '{}': loading its composing model '{}'", prepared[i].name, step);
      known.insert(step);
      prepared.push_back(prepare(step));
    }
  }
}

}  // namespace ortserve

#pragma once
// The offline repository check (`ortserve check`): what a server start with
// the same options would decide for each model, without serving anything.
// Every step the loader takes before it creates a model's sessions is taken
// here through the same code (PrepareModel, PreparedOrder.h, ModelBuilder's
// CheckFallback / CheckResponseCacheUse / CheckEnsembleSteps); the only ORT
// work is auto-complete's reading of each model file's inputs and outputs.
// Not covered by default: failures that only creating the sessions or the
// warm-up reveals (a GPU that is missing, an ORT error at session creation, a
// configured warm-up that fails); CheckDepth::kSessions (`ortserve check
// --load`) covers them through the loader's own session step (ModelBuilder's
// CheckSessions), one version at a time, dropping each version's sessions
// before the next.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model_config.pb.h"
#include "repository/ModelRepository.h"

namespace ortserve {

struct ModelVerdict {
  std::string name;
  // The versions that would load, each with its completed config (what
  // GET /v2/models/<name>/versions/<v>/config would answer).
  std::vector<std::pair<int64_t, inference::ModelConfig>> versions;
  // Every reason it would not load fully, as the server reports them
  // (a version's prefixed "version N: ").
  std::vector<std::string> errors;
  bool ok() const { return errors.empty(); }
};

enum class CheckDepth {
  kConfig,    // everything before sessions (auto-complete reads the model's inputs and outputs)
  kSessions,  // also each version's sessions, warm-up and reference check, as a load makes them
};

// The models a start with `options` would load (all, or --load-model's in
// explicit mode, with the composing models of ensembles), in load order.
std::vector<ModelVerdict> CheckRepository(const RepositoryOptions& options, CheckDepth depth = CheckDepth::kConfig);

}  // namespace ortserve

#pragma once
// The model repository: discovers models in a Triton-layout folder
// (<repo>/<model>/<version>/model.onnx, optional <repo>/<model>/config.pbtxt),
// parses or auto-completes their configs, loads and warms them, and hands out
// refcounted handles so an unload never frees a model under a running request.
#include <memory>
#include <string>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/ModelStatistics.h"
#include "core/Status.h"
#include "model_config.pb.h"  // generated from proto/model_config.proto (Triton's ModelConfig)

namespace ortserve {

enum class ModelState { kLoading, kReady, kUnavailable, kUnloading };
const char* ModelStateName(ModelState state);  // "LOADING", "READY", "UNAVAILABLE", "UNLOADING"

// One loaded model version. Thread-safe.
class Model {
 public:
  virtual ~Model() = default;
  virtual const std::string& name() const = 0;
  virtual const std::string& version() const = 0;
  // The complete config (auto-completed where config.pbtxt was silent).
  virtual const inference::ModelConfig& config() const = 0;
  virtual ModelStatistics& stats() = 0;
  virtual bool ready() const = 0;
  // Validates the request against the config (names, datatypes, shapes, batch
  // size, byte sizes, requested outputs) and schedules it. on_complete is
  // called exactly once; a validation failure answers synchronously with
  // kInvalidArgument naming the problem.
  virtual void Infer(std::unique_ptr<InferenceRequest> request) = 0;
  virtual size_t QueueDepth() const = 0;
};

struct ModelIndexEntry {
  std::string name;
  std::string version;  // empty when the model failed before any version was found
  ModelState state;
  std::string reason;   // why UNAVAILABLE
};

struct RepositoryOptions {
  std::string repository_path;
  // Cores the thread plan may use across all instances (default: hardware).
  int thread_budget = 0;
};

class ModelRepository {
 public:
  static Result<std::unique_ptr<ModelRepository>> Create(RepositoryOptions options);
  virtual ~ModelRepository() = default;

  // Loads every model in the repository. A model that fails is recorded as
  // UNAVAILABLE with its reason (and logged); the others load regardless.
  virtual void LoadAll() = 0;

  // A ready model version. `version` empty: the newest ready version allowed by
  // the version policy. kNotFound names the model/version when there is none;
  // kUnavailable when it exists but is not ready.
  virtual Result<std::shared_ptr<Model>> GetModel(const std::string& name,
                                                  const std::string& version) const = 0;

  // Every model and version known, with state and reason, sorted by name.
  virtual std::vector<ModelIndexEntry> Index() const = 0;
  // All ready model versions (for statistics).
  virtual std::vector<std::shared_ptr<Model>> ReadyModels() const = 0;
  // True when every model found in the repository is ready.
  virtual bool AllModelsReady() const = 0;

  // Stops every scheduler after its in-flight requests finish.
  virtual void Shutdown() = 0;
};

}  // namespace ortserve

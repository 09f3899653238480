#pragma once
// One loaded model version as the front ends see it: its identity, config,
// statistics and readiness, and Infer -- the entry of the request path
// (serving/ServedModel.h implements it).
#include <memory>
#include <string>

#include "core/InferenceRequest.h"
#include "core/ModelStatistics.h"
#include "serving/InputDrift.h"  // what the front ends read of drift()
#include "serving/ShadowComparison.h"  // and of shadow()
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
  // Admits the request (readiness; names, datatypes, shapes, batch size,
  // byte sizes, priority, requested outputs against the config) and
  // schedules it. on_complete is called exactly once, from any thread; a
  // request refused at once is answered synchronously (kInvalidArgument
  // naming the problem, kUnavailable when not ready).
  virtual void Infer(std::unique_ptr<InferenceRequest> request) = 0;
  virtual size_t QueueDepth() const = 0;
  // Instances running a batch right now.
  virtual size_t BusyInstances() const { return 0; }
  // Its input drift statistics (serving/InputDrift.h); null: not configured.
  virtual const InputDrift* drift() const { return nullptr; }
  // Its shadow comparison (serving/ShadowComparison.h); null: its requests
  // are not shadowed.
  virtual const ShadowComparison* shadow() const { return nullptr; }
};

}  // namespace ortserve

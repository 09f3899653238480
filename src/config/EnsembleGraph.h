#pragma once
// An ensemble's steps as a data-flow graph (Triton's `platform: "ensemble"`
// with `ensemble_scheduling`), checked at load time in two stages, with
// Triton's error texts (core model_config_utils.cc, ensemble_utils.cc):
//   CheckEnsembleScheduling    the config alone: every step names a model and
//                              maps inputs and outputs; no tensor is produced
//                              twice; the steps form no cycle; every ensemble
//                              input is consumed, every output produced, and
//                              every tensor in between used;
//   CheckEnsembleAgainstModels with the composing models' complete configs:
//                              every mapped name exists, every required input
//                              is mapped once, data types and shapes agree
//                              between producer and consumers, and
//                              max_batch_size fits.
// MakeEnsemblePlan turns a checked config into what the scheduler runs.
// Pure functions.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/Status.h"
#include "model_config.pb.h"

namespace ortserve {

inline constexpr const char* kEnsemblePlatform = "ensemble";

bool IsEnsemble(const inference::ModelConfig& config);

// "step 1 (model 'm')": how every message names a step (0-based, as Triton).
std::string StepLabel(size_t index, const std::string& model_name);

// The config-only checks; kUnavailable naming the step or tensor at fault.
Status CheckEnsembleScheduling(const inference::ModelConfig& config);

// The checks against the composing models: `step_configs[i]` is the complete
// config of step i's model. kUnavailable naming the step and tensor.
Status CheckEnsembleAgainstModels(const inference::ModelConfig& config,
                                  const std::vector<const inference::ModelConfig*>& step_configs);

struct EnsembleStep {
  size_t index = 0;
  std::string model_name;
  int64_t model_version = -1;  // -1 (or 0, unset): the newest ready version
  // (model tensor, ensemble tensor), sorted by model tensor.
  std::vector<std::pair<std::string, std::string>> inputs;
  std::vector<std::pair<std::string, std::string>> outputs;
};

struct EnsemblePlan {
  std::string name;
  std::vector<EnsembleStep> steps;
  std::vector<std::string> inputs;   // the ensemble's inputs, in config order
  std::vector<std::string> outputs;  // the ensemble's outputs, in config order
};

// Why `step`'s model cannot serve (none of its versions, or not the one
// the step names, is READY), in Triton's words (ModelRepositoryManager's
// dependency check).
Status EnsembleDependencyError(const std::string& ensemble, const EnsembleStep& step);

// The plan of a config that passed CheckEnsembleScheduling.
EnsemblePlan MakeEnsemblePlan(const inference::ModelConfig& config);

}  // namespace ortserve

#pragma once
// The loader's first step for one model directory: read and complete its
// config, choose its versions, and check each against its model file --
// everything that can fail before a session is created. Nothing is
// published and nothing is loaded here.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/ConfigAutoComplete.h"
#include "config/DriftConfig.h"
#include "config/ReferenceConfig.h"
#include "config/RolloutConfig.h"
#include "config/RuntimeConfig.h"
#include "config/ShadowConfig.h"
#include "model_config.pb.h"
#include "repository/ModelRepository.h"
#include "repository/ThreadPlan.h"
#include "scheduler/DynamicBatcherOptions.h"
#include "scheduler/SequenceBatcherOptions.h"
#include "serving/Classification.h"
#include "serving/WeightedVersionPicker.h"

namespace ortserve {

struct DriftProfile;

// A model version whose config is complete and checked, waiting to be loaded.
struct Candidate {
  std::string name;
  int64_t version = 0;
  std::filesystem::path model_dir;
  std::string model_path;
  std::string stamp;  // config + label files + model file: what a reload compares
  inference::ModelConfig config;
  std::shared_ptr<const OutputLabels> labels;  // the outputs' label_filename contents
  OrtSessionSettings settings;
  std::vector<InstanceSpec> instances;
  DynamicBatcherOptions batcher_options;  // models without sequence_batching
  std::optional<SequenceBatcherOptions> sequence_options;  // models with it
  std::optional<ThreadPlanEntry> plan;  // set by the startup plan
  std::optional<DriftConfig> drift;     // drift_* parameters (config/DriftConfig.h)
  std::shared_ptr<const DriftProfile> drift_reference;  // drift_reference's profile, read and checked
  std::optional<ShadowConfig> shadow;   // shadow_* parameters (config/ShadowConfig.h)
  // reference_* parameters (config/ReferenceConfig.h), parsed once when the
  // config is read; the load order and the reference check use this.
  std::optional<ReferenceConfig> reference;
};

// What preparing one model directory found.
struct PreparedModel {
  std::string name;
  std::string dir_stamp;
  std::string failure;  // the whole model failed
  std::map<int64_t, std::string> version_failures;
  std::vector<Candidate> candidates;
  std::shared_ptr<WeightedVersionPicker> canary;
  std::optional<RolloutConfig> rollout;  // rollout_* parameters (config/RolloutConfig.h)
  int64_t shadow_version = 0;            // shadow_version; 0: none
};

// Prepares <repository>/<name>. Config problems and missing files are
// recorded in the result (failure, version_failures), never thrown.
// `auto_complete`: whether and how configs are completed from the model file.
// `server_op_libraries`: --op-library, registered for every model (its file
// is inspected with them, and with its own model_operations libraries).
// `server_config_entries`: ONNX Runtime session config entries for every
// model (--backend-config=onnxruntime,session.<key>=V); each of the model's
// entries is offered to ORT's AddConfigEntry here, so that a value ORT
// refuses there fails the model with ORT's message before any session.
// `signing`: each version's model.sig is checked before its files are
// opened (ModelSigning.h).
PreparedModel PrepareModel(const std::filesystem::path& repository, const std::string& name,
                           const AutoCompletePolicy& auto_complete = {},
                           const std::vector<std::string>& server_op_libraries = {},
                           const SessionConfigEntries& server_config_entries = {},
                           const ModelSigningOptions& signing = {});

}  // namespace ortserve

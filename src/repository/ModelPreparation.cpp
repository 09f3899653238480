#include "repository/ModelPreparation.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "config/ConfigAutoComplete.h"
#include "config/ConfigChecks.h"
#include "config/ConfigNormalize.h"
#include "config/ConfigParse.h"
#include "config/ConfigRules.h"
#include "config/ConfigTypes.h"
#include "config/EnsembleGraph.h"
#include "config/ModelFiles.h"
#include "config/ReferenceConfig.h"
#include "config/RolloutConfig.h"
#include "config/SequenceConfig.h"
#include "config/ShapeBucketConfig.h"
#include "config/VersionPolicy.h"
#include "core/Text.h"
#include "repository/ModelDirectory.h"
#include "repository/ModelSigning.h"
#include "runtime/OrtModelInstance.h"
#include "runtime/OrtSessionFactory.h"
#include "serving/InputDrift.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;

// What is logged about a config, not failed: fields and parameters ortserve
// does not act on.
void WarnAboutIgnored(const std::string& name, const inference::ModelConfig& config) {
  const auto ignored = IgnoredConfigFields(config);
  if (!ignored.empty()) {
    spdlog::warn("model '{}': ignoring config fields not used for ONNX serving: {}", name, Join(ignored));
  }
  std::vector<std::string> unknown;
  for (const auto& [key, value] : config.parameters()) {
    if (!IsKnownParameter(key) && key != kVersionWeightsParameter) unknown.push_back(key);
  }
  std::sort(unknown.begin(), unknown.end());
  if (!unknown.empty()) spdlog::warn("model '{}': ignoring unknown parameters: {}", name, Join(unknown));
  for (const auto& [key, value] : config.parameters()) {
    // ORT's keys are "<area>.<name>" and ORT ignores others: most likely the
    // ORT key was written without our prefix ("session.disable_prepacking").
    if (key.starts_with(kSessionConfigPrefix) && key.find('.', kSessionConfigPrefix.size()) == std::string::npos) {
      spdlog::warn("model '{}': parameter '{}' passes '{}' to ONNX Runtime, which ignores keys it does not know; "
                   "for ORT's key '{}' write 'session.{}'",
                   name, key, key.substr(kSessionConfigPrefix.size()), key, key);
    }
  }
}

// config.pbtxt (when there is one), named after its directory; the canary
// weights it sets go into `p`, its reference_* parameters into `reference`.
Result<inference::ModelConfig> ReadConfig(const fs::path& dir, const std::string& name, bool auto_complete,
                                          PreparedModel* p, std::optional<ReferenceConfig>* reference) {
  inference::ModelConfig config;
  const fs::path config_path = dir / "config.pbtxt";
  std::error_code ec;
  if (!auto_complete && !fs::exists(config_path, ec)) {
    return Unavailable("no config.pbtxt in " + dir.string() +
                       ": auto-complete is disabled (--disable-auto-complete-config), so every model needs one");
  }
  if (fs::exists(config_path, ec)) {
    auto text = ReadFile(config_path);
    if (!text.ok()) return text.status();
    auto parsed = ParseModelConfig(text.value(), "config.pbtxt");
    if (!parsed.ok()) return parsed.status();
    config = std::move(parsed).value();
  }
  // A name that differs from the directory's is reported once the config
  // itself is checked (NameMatchesDirectory), as Triton orders it.
  if (config.name().empty()) config.set_name(name);
  WarnAboutIgnored(name, config);
  if (auto w = config.parameters().find(kVersionWeightsParameter); w != config.parameters().end()) {
    auto weights = ParseVersionWeights(w->second.string_value());
    if (!weights.ok()) return weights.status();
    p->canary = std::make_shared<WeightedVersionPicker>(std::move(weights).value());
  }
  auto rollout = RolloutConfig::FromConfig(config);
  if (!rollout.ok()) return rollout.status();
  p->rollout = std::move(rollout).value();
  // Read here so that a bad reference_* parameter fails before any session
  // is made; the reference check uses what it read (repository/ReferenceCheck.h).
  auto parsed_reference = ReferenceConfig::FromConfig(config);
  if (!parsed_reference.ok()) return parsed_reference.status();
  *reference = std::move(parsed_reference).value();
  if (*reference && IsEnsemble(config)) {
    return Unavailable(std::string("parameter '") + kReferenceModelParameter +
                       "' cannot be used with an ensemble: it has no model file to compare; set it on a "
                       "composing model");
  }
  const std::string& filename = config.default_model_filename();
  if (filename.find('/') != std::string::npos || filename == "." || filename == "..") {
    return Unavailable("default_model_filename '" + filename + "' must be a file name inside the version directory");
  }
  return config;
}

// The drift_* parameters into `common`, with drift_reference's profile read
// from the model folder and checked against the config's inputs.
Status PrepareDrift(const fs::path& dir, Candidate* common) {
  auto drift = DriftConfig::FromConfig(common->config);
  if (!drift.ok()) return drift.status();
  common->drift = std::move(drift).value();
  if (!common->drift || common->drift->reference_path.empty()) return Status::Ok();
  const std::string& path = common->drift->reference_path;
  auto resolved = ResolveInside(dir, path);  // also refuses a symlink out of the folder
  auto text = resolved.ok() ? ReadFile(*resolved) : Result<std::string>(resolved.status());
  if (!text.ok()) {
    return Unavailable(std::string("parameter '") + kDriftReferenceParameter + "' value '" + path +
                       "': " + text.status().message());
  }
  auto profile = ParseDriftProfile(text.value());
  if (!profile.ok()) {
    return Unavailable(std::string("parameter '") + kDriftReferenceParameter + "' value '" + path +
                       "': " + profile.status().message());
  }
  for (const DriftInputProfile& input : profile->inputs) {
    const auto& inputs = common->config.input();
    if (std::none_of(inputs.begin(), inputs.end(), [&](const auto& i) { return i.name() == input.name; })) {
      return Unavailable(std::string("parameter '") + kDriftReferenceParameter + "' value '" + path +
                         "': the profile's input '" + input.name + "' is not an input of the model");
    }
  }
  common->drift_reference = std::make_shared<const DriftProfile>(std::move(profile).value());
  common->stamp += "|" + FileStamp(dir / path);
  return Status::Ok();
}

// The shadow_* parameters into `common` and `p`, checked against the model
// and the versions version_policy loads (`load`).
Status PrepareShadow(const std::vector<int64_t>& load, Candidate* common, PreparedModel* p) {
  auto shadow = ShadowConfig::FromConfig(common->config);
  if (!shadow.ok()) return shadow.status();
  if (!shadow.value()) return Status::Ok();
  const ShadowConfig& s = *shadow.value();
  const std::string named = std::string("parameter '") + kShadowVersionParameter + "' value '" +
                            std::to_string(s.version) + "'";
  if (IsEnsemble(common->config)) {
    return Unavailable(named + ": an ensemble cannot be shadowed; set it on a composing model");
  }
  if (common->config.has_sequence_batching()) {
    return Unavailable(named + ": a model with sequence batching cannot be shadowed (its requests carry state)");
  }
  if (std::find(load.begin(), load.end(), s.version) == load.end()) {
    std::vector<std::string> loaded;
    for (int64_t v : load) loaded.push_back(std::to_string(v));
    return Unavailable(named + ": version_policy does not load that version (it loads " + Join(loaded) + ")");
  }
  if (load.size() < 2) return Unavailable(named + ": no other version is loaded to serve the requests it shadows");
  if (p->canary) {
    for (const VersionWeight& w : p->canary->weights()) {
      if (w.version == s.version && w.weight > 0) {
        return Unavailable(named + ": version_weights gives the shadow version a weight; a shadow version "
                           "answers only requests that name it");
      }
    }
  }
  common->shadow = s;
  p->shadow_version = s.version;
  return Status::Ok();
}

// Whether this server's ONNX Runtime has the CUDA provider (read once).
bool HasCudaProvider() {
  static const bool has = [] {
    const std::vector<std::string> providers = AvailableExecutionProviders();
    return std::find(providers.begin(), providers.end(), "CUDAExecutionProvider") != providers.end();
  }();
  return has;
}

// Triton's normalisation and its config rules (ConfigRules.h), then the
// platform, session settings and instances, into `common`. With
// auto-complete on, a tensor it will fill is checked once it has.
Status CheckConfigBeforeFiles(Candidate* common, bool auto_complete,
                              const std::vector<std::string>& server_op_libraries,
                              const SessionConfigEntries& server_config_entries) {
  inference::ModelConfig& config = common->config;
  NormalizeModelConfig(&config);
  ORTSERVE_RETURN_IF_ERROR(CheckModelConfigRules(config));
  ORTSERVE_RETURN_IF_ERROR(CheckModelIoRules(config, /*skip_gaps=*/auto_complete));
  ORTSERVE_RETURN_IF_ERROR(CheckPlatform(&config));
  // An ensemble's steps are checked against its composing models when it is built.
  if (IsEnsemble(config)) return Status::Ok();
  // The schedulers' own rules; a sequence model's once its config is final
  // (auto-complete may still set max_batch_size, which they check against).
  if (config.has_sequence_batching()) {
    if (!auto_complete) {
      auto sequence = MakeSequenceBatcherOptions(config, "", common->model_dir);
      if (!sequence.ok()) return sequence.status();
    }
  } else if (auto batcher = MakeDynamicBatcherOptions(config, ""); !batcher.ok()) {
    return batcher.status();
  }
  auto settings = ReadSessionSettings(config, server_op_libraries, server_config_entries);
  if (!settings.ok()) return settings.status();
  // GPU ids any GPU could have are left to the CUDA provider; without it (or
  // a config that lets a GPU instance fall back to CPU) no id can be used.
  ORTSERVE_RETURN_IF_ERROR(
      CheckInstanceGroupGpus(config, HasCudaProvider() || settings.value().gpu.allow_cpu_fallback));
  ORTSERVE_RETURN_IF_ERROR(CheckSessionConfigEntries(settings->config_entries));
  auto instances = ExpandInstanceGroups(config);
  if (!instances.ok()) return instances.status();
  common->settings = settings.value();
  common->instances = instances.value();
  return Status::Ok();
}

Status NameMatchesDirectory(const inference::ModelConfig& config, const std::string& directory) {
  if (config.name() == directory) return Status::Ok();
  return Unavailable("unexpected directory name '" + directory + "' for model '" + config.name() +
                     "', directory name must equal model name");
}

// The version directories of `dir`, each number once.
std::vector<int64_t> FindVersions(const fs::path& dir, const std::string& name) {
  std::vector<int64_t> available;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code dir_ec;
    if (!entry.is_directory(dir_ec)) continue;
    const std::string vname = entry.path().filename().string();
    if (auto v = ParseVersionDir(vname)) {
      if (std::find(available.begin(), available.end(), *v) != available.end()) {
        spdlog::warn("model '{}': version directory '{}' duplicates version {}; skipped", name, vname, *v);
        continue;
      }
      available.push_back(*v);
    } else if (!vname.empty() && vname[0] != '.' && vname != "warmup") {
      spdlog::debug("model '{}': '{}' is not a version directory; skipped", name, vname);
    }
  }
  return available;
}

// The files outside the version folder the config makes a load read: label
// files, op libraries, warm-up data, sequence initial states.
std::vector<fs::path> FilesNamedByConfig(const Candidate& c) {
  std::vector<fs::path> named;
  for (const auto& out : c.config.output()) {
    if (!out.label_filename().empty()) named.push_back(c.model_dir / out.label_filename());
  }
  for (const auto& library : c.config.model_operations().op_library_filename()) named.emplace_back(library);
  for (const auto& warmup : c.config.model_warmup()) {
    for (const auto& [input, data] : warmup.inputs()) {
      if (!data.input_data_file().empty()) named.push_back(c.model_dir / "warmup" / data.input_data_file());
    }
  }
  for (const auto& state : c.config.sequence_batching().state()) {
    for (const auto& initial : state.initial_state()) {
      if (!initial.data_file().empty()) named.push_back(c.model_dir / kInitialStateFolder / initial.data_file());
    }
  }
  return named;
}

// Version `v` against its model.sig, before anything of it is opened: the
// failure under kRequire, logged under kWarn.
Status CheckSignature(const Candidate& c, const ModelSigningOptions& signing) {
  if (signing.policy == SignaturePolicy::kOff) return Status::Ok();
  const std::vector<fs::path> named = FilesNamedByConfig(c);
  Status checked = CheckModelSignature(c.model_dir, c.version, named, signing);
  if (checked.ok()) return checked;
  const std::string reason = "model signature check failed: " + checked.message();
  if (signing.policy == SignaturePolicy::kRequire) return Unavailable(reason);
  spdlog::warn("model '{}' version {}: {} (--model-signature-policy=warn: loading anyway)", c.name, c.version,
               reason);
  return Status::Ok();
}

// Version `v` checked against its signature and model file; its failure otherwise.
Result<Candidate> PrepareVersion(const Candidate& common, int64_t v, const std::string& filename,
                                 const AutoCompletePolicy& auto_complete, const ModelSigningOptions& signing) {
  Candidate c = common;
  c.version = v;
  if (IsEnsemble(c.config)) return c;  // no model file
  ORTSERVE_RETURN_IF_ERROR(CheckSignature(c, signing));
  if (signing.policy != SignaturePolicy::kOff) {  // a re-signed version reloads (poll mode)
    c.stamp += "|" + FileStamp(c.model_dir / "model.sig");
    c.stamp += "|" + FileStamp(c.model_dir / std::to_string(v) / "model.sig");
  }
  const fs::path model_path = c.model_dir / std::to_string(v) / filename;
  std::error_code ec;
  if (!fs::is_regular_file(model_path, ec)) {
    ORTSERVE_RETURN_IF_ERROR(CheckScalarReshapesWithoutFile(c.config));
    return Unavailable("model file not found: " + model_path.string());
  }
  c.model_path = model_path.string();
  c.stamp += "|" + FileStamp(model_path);
  auto signature = InspectModel(c.model_path, c.settings.op_libraries);
  if (!signature.ok()) return Unavailable("cannot inspect " + filename + ": " + signature.status().message());
  if (auto_complete.enabled) {
    ORTSERVE_RETURN_IF_ERROR(
        AutoCompleteConfig(signature.value(), &c.config, auto_complete.default_max_batch_size));
    NormalizeModelConfig(&c.config);  // the preferred size of a dynamic_batching just added
    ORTSERVE_RETURN_IF_ERROR(CheckModelConfigRules(c.config));
    ORTSERVE_RETURN_IF_ERROR(CheckModelIoRules(c.config));
  }
  ORTSERVE_RETURN_IF_ERROR(ValidateConfigAgainstSignature(c.config, signature.value()));
  // Once the tensors are final: the bucketed dims are checked against them.
  if (auto buckets = ShapeBucketConfig::FromConfig(c.config); !buckets.ok()) return buckets.status();
  if (c.config.has_sequence_batching()) {
    auto sequence_options = MakeSequenceBatcherOptions(c.config, std::to_string(v), c.model_dir);
    if (!sequence_options.ok()) return sequence_options.status();
    c.sequence_options = std::move(sequence_options).value();
    return c;
  }
  auto batcher_options = MakeDynamicBatcherOptions(c.config, std::to_string(v));
  if (!batcher_options.ok()) return batcher_options.status();
  c.batcher_options = std::move(batcher_options).value();
  return c;
}

}  // namespace

PreparedModel PrepareModel(const fs::path& repository, const std::string& name,
                           const AutoCompletePolicy& auto_complete,
                           const std::vector<std::string>& server_op_libraries,
                           const SessionConfigEntries& server_config_entries,
                           const ModelSigningOptions& signing) {
  PreparedModel p;
  p.name = name;
  const fs::path dir = repository / name;
  p.dir_stamp = DirectoryStamp(dir);
  std::optional<ReferenceConfig> reference;
  auto config = ReadConfig(dir, name, auto_complete.enabled, &p, &reference);
  if (!config.ok()) {
    p.failure = config.status().message();
    return p;
  }
  // What every version shares, checked before any file is looked at: a
  // config error is reported as such, never hidden behind a missing version
  // directory or model file. A failure here fails the whole model.
  Candidate common;
  common.name = name;
  common.model_dir = dir;
  common.stamp = FileStamp(dir / "config.pbtxt");
  common.config = std::move(config).value();
  common.reference = std::move(reference);
  const bool names_its_backend = !common.config.platform().empty() || !common.config.backend().empty() ||
                                 !common.config.default_model_filename().empty();
  if (Status checked = CheckConfigBeforeFiles(&common, auto_complete.enabled, server_op_libraries,
                                                server_config_entries);
      !checked.ok()) {
    p.failure = checked.message();
    return p;
  }
  if (Status named = NameMatchesDirectory(common.config, name); !named.ok()) {
    p.failure = named.message();
    return p;
  }
  if (Status drift = PrepareDrift(dir, &common); !drift.ok()) {
    p.failure = drift.message();
    return p;
  }
  std::vector<int64_t> available = FindVersions(dir, name);
  // An ensemble has nothing to put in a version directory: without one it is version 1.
  if (available.empty() && IsEnsemble(common.config)) available.push_back(1);
  if (available.empty()) {
    if (Status scalars = CheckScalarReshapesWithoutFile(common.config); !scalars.ok()) {
      p.failure = scalars.message();
      return p;
    }
    // Triton's words where it would look for a model file to tell the
    // backend by (auto-complete on, nothing in the config names one).
    p.failure = auto_complete.enabled && !names_its_backend
                    ? "Invalid model name: Could not determine backend for model '" + name +
                          "' with no backend in model configuration. Expected model name of the form "
                          "'model.<backend_name>'. (no version directories (positive integers) in " +
                          dir.string() + ")"
                    : "no version directories (positive integers) in " + dir.string();
    return p;
  }
  const VersionSelection selection = SelectVersions(common.config.version_policy(), available);
  for (int64_t v : selection.missing) {
    p.version_failures[v] = "version " + std::to_string(v) + " is required by version_policy but has no directory";
  }
  if (selection.load.empty()) {
    p.failure = "version_policy selects no version";
    return p;
  }
  if (Status shadow = PrepareShadow(selection.load, &common, &p); !shadow.ok()) {
    p.failure = shadow.message();
    return p;
  }
  auto labels = OutputLabels::Read(common.config, dir);
  if (!labels.ok()) {
    for (int64_t v : selection.load) p.version_failures[v] = labels.status().message();
    return p;
  }
  common.labels = std::make_shared<const OutputLabels>(std::move(labels).value());
  for (const auto& out : common.config.output()) {
    if (!out.label_filename().empty()) common.stamp += "|" + FileStamp(dir / out.label_filename());
  }
  const std::string& filename = common.config.default_model_filename();
  for (int64_t v : selection.load) {
    auto candidate = PrepareVersion(common, v, filename, auto_complete, signing);
    if (!candidate.ok()) {
      p.version_failures[v] = candidate.status().message();
      continue;
    }
    p.candidates.push_back(std::move(candidate).value());
  }
  return p;
}

}  // namespace ortserve

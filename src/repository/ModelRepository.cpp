#include "repository/ModelRepository.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <thread>

#include "repository/ModelConfigUtil.h"
#include "repository/RequestValidator.h"
#include "repository/RuntimeConfig.h"
#include "repository/ThreadPlan.h"
#include "repository/VersionPolicy.h"
#include "repository/Warmup.h"
#include "runtime/OrtModelInstance.h"
#include "scheduler/ModelScheduler.h"

namespace ortserve {

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading: return "LOADING";
    case ModelState::kReady: return "READY";
    case ModelState::kUnavailable: return "UNAVAILABLE";
    case ModelState::kUnloading: return "UNLOADING";
  }
  return "UNKNOWN";
}

namespace {

namespace fs = std::filesystem;

std::string Join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// Version directory names are positive decimal integers ("1", "42").
std::optional<int64_t> ParseVersionDir(const std::string& name) {
  if (name.empty() || name.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v <= 0) return std::nullopt;
  return v;
}

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable("cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ModelImpl final : public Model {
 public:
  ModelImpl(inference::ModelConfig config, std::string version, bool reorder_outputs)
      : shared_config_(std::make_shared<const inference::ModelConfig>(std::move(config))),
        config_(*shared_config_),
        version_(std::move(version)),
        stats_(config_.max_batch_size()),
        output_reshape_(HasOutputReshape(config_)),
        reorder_outputs_(reorder_outputs) {}

  ~ModelImpl() override { Shutdown(); }

  const std::string& name() const override { return config_.name(); }
  const std::string& version() const override { return version_; }
  const inference::ModelConfig& config() const override { return config_; }
  ModelStatistics& stats() override { return stats_; }
  bool ready() const override { return state_.load(std::memory_order_acquire) == ModelState::kReady; }
  size_t QueueDepth() const override { return scheduler_ ? scheduler_->QueueDepth() : 0; }

  void Start(std::unique_ptr<ModelScheduler> scheduler) {
    scheduler_ = std::move(scheduler);
    state_.store(ModelState::kReady, std::memory_order_release);
  }

  void Shutdown() {
    state_.store(ModelState::kUnloading, std::memory_order_release);
    if (scheduler_) scheduler_->Shutdown();
  }

  void Infer(std::unique_ptr<InferenceRequest> request) override {
    if (!request) return;
    Status status;
    if (!ready()) {
      status = Unavailable("model '" + name() + "' version '" + version_ + "' is not ready");
    } else {
      status = ValidateRequest(config_, *request);
      if (status.ok()) status = ApplyInputReshape(config_, request.get());
    }
    if (!status.ok()) {
      const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
          Clock::now() - request->arrival_time);
      stats_.fail.Add(static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count())));
      CompletionCallback done = std::move(request->on_complete);
      if (done) done(status);
      return;
    }
    const bool filter = reorder_outputs_ && request->requested_outputs.empty();
    if (output_reshape_ || filter) {
      // Captures the config, not `this`: the callback may run after the last
      // handle to this model is gone.
      request->on_complete = [config = shared_config_, filter, reshape = output_reshape_,
                              done = std::move(request->on_complete)](
                                 Result<InferenceResponse> result) {
        if (result.ok()) {
          InferenceResponse& response = result.value();
          if (filter) KeepConfigOutputs(*config, &response);
          if (reshape) {
            Status st = ApplyOutputReshape(*config, &response);
            if (!st.ok()) {
              done(st);
              return;
            }
          }
        }
        done(std::move(result));
      };
    }
    scheduler_->Submit(std::move(request));
  }

 private:
  // The request named no outputs: answer the config's outputs in config order
  // (the instance produces every model output in its own order).
  static void KeepConfigOutputs(const inference::ModelConfig& config, InferenceResponse* response) {
    InferenceResponse filtered = *response;
    filtered.outputs.clear();
    filtered.requested.clear();
    for (const auto& out : config.output()) {
      for (size_t i = 0; i < response->outputs.size(); ++i) {
        if (response->outputs[i].name == out.name()) {
          filtered.outputs.push_back(std::move(response->outputs[i]));
          if (i < response->requested.size()) {
            filtered.requested.push_back(response->requested[i]);
          } else {
            filtered.requested.push_back({out.name(), false});
          }
          break;
        }
      }
    }
    *response = std::move(filtered);
  }

  const std::shared_ptr<const inference::ModelConfig> shared_config_;
  const inference::ModelConfig& config_;
  const std::string version_;
  ModelStatistics stats_;  // outlives scheduler_ (declared before it)
  const bool output_reshape_;
  const bool reorder_outputs_;
  std::atomic<ModelState> state_{ModelState::kLoading};
  std::unique_ptr<ModelScheduler> scheduler_;
};

struct VersionRecord {
  ModelState state = ModelState::kLoading;
  std::string reason;
  std::shared_ptr<ModelImpl> model;
};

struct ModelRecord {
  std::string reason;  // failure before any version could be considered
  std::map<int64_t, VersionRecord> versions;
};

// A model version whose config is complete and checked, waiting to be loaded.
struct Candidate {
  std::string name;
  int64_t version = 0;
  fs::path model_dir;
  std::string model_path;
  inference::ModelConfig config;
  OrtSessionSettings settings;
  std::vector<InstanceSpec> instances;
  SchedulerOptions scheduler_options;
};

class ModelRepositoryImpl final : public ModelRepository {
 public:
  explicit ModelRepositoryImpl(RepositoryOptions options)
      : options_(std::move(options)),
        compute_slots_(std::make_shared<ComputeSlots>(options_.thread_budget)) {}
  ~ModelRepositoryImpl() override { Shutdown(); }

  void LoadAll() override {
    std::vector<fs::path> dirs;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(options_.repository_path, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      std::error_code dir_ec;
      if (!entry.is_directory(dir_ec)) continue;
      dirs.push_back(entry.path());
    }
    if (ec) {
      spdlog::error("cannot list model repository {}: {}", options_.repository_path, ec.message());
    }
    std::sort(dirs.begin(), dirs.end());

    // Parse and check every config first: the thread plan needs the total
    // instance count before any session is created.
    std::vector<Candidate> candidates;
    for (const auto& dir : dirs) Prepare(dir, &candidates);

    std::vector<ThreadPlanRequest> requests;
    for (const auto& c : candidates) {
      ThreadPlanRequest r;
      r.label = c.name + ":" + std::to_string(c.version);
      r.instances = static_cast<int>(c.instances.size());
      r.explicit_intra = c.settings.intra_op_threads;
      r.inter = c.settings.inter_op_threads;
      r.parallel_execution = c.settings.execution_mode == ExecutionMode::kParallel;
      r.allow_spinning = c.settings.allow_spinning;
      requests.push_back(std::move(r));
    }
    const ThreadPlan plan = ThreadPlan::Compute(options_.thread_budget, requests);
    for (const auto& line : plan.Describe()) spdlog::info("thread plan: {}", line);
    if (plan.oversubscribed) {
      bool any_explicit = std::any_of(plan.entries.begin(), plan.entries.end(),
                                      [](const ThreadPlanEntry& e) { return e.explicit_intra; });
      spdlog::info("thread plan: {} threads exist for {} cores{}; executions wait for free compute "
                   "slots rather than contend",
                   plan.total_threads, plan.budget,
                   any_explicit ? " because of configured intra_op_thread_count"
                                : " (more instances than cores)");
    }

    for (size_t i = 0; i < candidates.size(); ++i) Load(candidates[i], plan.entries[i]);
  }

  Result<std::shared_ptr<Model>> GetModel(const std::string& name,
                                          const std::string& version) const override {
    std::shared_lock lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) return NotFound("unknown model '" + name + "'");
    const ModelRecord& record = it->second;
    if (version.empty()) {
      for (auto v = record.versions.rbegin(); v != record.versions.rend(); ++v) {
        if (v->second.state == ModelState::kReady) return std::shared_ptr<Model>(v->second.model);
      }
      std::string reason = record.reason;
      for (auto v = record.versions.rbegin(); reason.empty() && v != record.versions.rend(); ++v) {
        reason = v->second.reason;
      }
      return Unavailable("model '" + name + "' is not ready" + (reason.empty() ? "" : ": " + reason));
    }
    for (const auto& [number, v] : record.versions) {
      if (std::to_string(number) != version) continue;
      if (v.state == ModelState::kReady) return std::shared_ptr<Model>(v.model);
      return Unavailable("model '" + name + "' version '" + version + "' is not ready" +
                         (v.reason.empty() ? "" : ": " + v.reason));
    }
    return NotFound("unknown version '" + version + "' of model '" + name + "'");
  }

  std::vector<ModelIndexEntry> Index() const override {
    std::shared_lock lock(mutex_);
    std::vector<ModelIndexEntry> out;
    for (const auto& [name, record] : models_) {
      if (record.versions.empty()) {
        out.push_back({name, "", ModelState::kUnavailable, record.reason});
      }
      for (const auto& [number, v] : record.versions) {
        out.push_back({name, std::to_string(number), v.state, v.reason});
      }
    }
    return out;
  }

  std::vector<std::shared_ptr<Model>> ReadyModels() const override {
    std::shared_lock lock(mutex_);
    std::vector<std::shared_ptr<Model>> out;
    for (const auto& [name, record] : models_) {
      for (const auto& [number, v] : record.versions) {
        if (v.state == ModelState::kReady) out.push_back(v.model);
      }
    }
    return out;
  }

  bool AllModelsReady() const override {
    std::shared_lock lock(mutex_);
    for (const auto& [name, record] : models_) {
      if (record.versions.empty()) return false;
      for (const auto& [number, v] : record.versions) {
        if (v.state != ModelState::kReady) return false;
      }
    }
    return true;
  }

  void Shutdown() override {
    std::vector<std::shared_ptr<ModelImpl>> models;
    {
      std::unique_lock lock(mutex_);
      for (auto& [name, record] : models_) {
        for (auto& [number, v] : record.versions) {
          if (v.model) {
            models.push_back(v.model);
            if (v.state == ModelState::kReady) v.state = ModelState::kUnloading;
          }
        }
      }
    }
    // Outside the lock: shutting down waits for in-flight requests.
    for (auto& m : models) m->Shutdown();
  }

 private:
  void FailModel(const std::string& name, const std::string& reason) {
    spdlog::error("model '{}' is UNAVAILABLE: {}", name, reason);
    std::unique_lock lock(mutex_);
    models_[name].reason = reason;
  }

  void SetVersion(const std::string& name, int64_t version, ModelState state,
                  const std::string& reason, std::shared_ptr<ModelImpl> model = nullptr) {
    if (state == ModelState::kUnavailable) {
      spdlog::error("model '{}' version {} is UNAVAILABLE: {}", name, version, reason);
    }
    std::unique_lock lock(mutex_);
    auto& v = models_[name].versions[version];
    v.state = state;
    v.reason = reason;
    v.model = std::move(model);
  }

  void Prepare(const fs::path& dir, std::vector<Candidate>* candidates) {
    const std::string name = dir.filename().string();
    {
      std::unique_lock lock(mutex_);
      models_[name];
    }
    inference::ModelConfig config;
    const fs::path config_path = dir / "config.pbtxt";
    std::error_code ec;
    if (fs::exists(config_path, ec)) {
      auto text = ReadFile(config_path);
      if (!text.ok()) return FailModel(name, text.status().message());
      auto parsed = ParseModelConfig(text.value(), "config.pbtxt");
      if (!parsed.ok()) return FailModel(name, parsed.status().message());
      config = std::move(parsed).value();
    }
    if (config.name().empty()) {
      config.set_name(name);
    } else if (config.name() != name) {
      return FailModel(name, "config.pbtxt names the model '" + config.name() +
                                 "' but its directory is '" + name + "'; they must be equal");
    }
    const auto ignored = IgnoredConfigFields(config);
    if (!ignored.empty()) {
      spdlog::warn("model '{}': ignoring config fields not used for ONNX serving: {}", name,
                   Join(ignored));
    }
    std::vector<std::string> unknown_params;
    for (const auto& [key, value] : config.parameters()) {
      if (!IsKnownParameter(key)) unknown_params.push_back(key);
    }
    std::sort(unknown_params.begin(), unknown_params.end());
    if (!unknown_params.empty()) {
      spdlog::warn("model '{}': ignoring unknown parameters: {}", name, Join(unknown_params));
    }
    std::string filename = config.default_model_filename().empty()
                               ? std::string(kDefaultModelFilename)
                               : config.default_model_filename();
    if (filename.find('/') != std::string::npos || filename == "." || filename == "..") {
      return FailModel(name, "default_model_filename '" + filename +
                                 "' must be a file name inside the version directory");
    }

    std::vector<int64_t> available;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::error_code dir_ec;
      if (!entry.is_directory(dir_ec)) continue;
      const std::string vname = entry.path().filename().string();
      if (auto v = ParseVersionDir(vname)) {
        if (std::find(available.begin(), available.end(), *v) != available.end()) {
          spdlog::warn("model '{}': version directory '{}' duplicates version {}; skipped", name,
                       vname, *v);
          continue;
        }
        available.push_back(*v);
      } else if (!vname.empty() && vname[0] != '.' && vname != "warmup") {
        spdlog::debug("model '{}': '{}' is not a version directory; skipped", name, vname);
      }
    }
    if (available.empty()) {
      return FailModel(name, "no version directories (positive integers) in " + dir.string());
    }
    const VersionSelection selection = SelectVersions(config.version_policy(), available);
    for (int64_t v : selection.missing) {
      SetVersion(name, v, ModelState::kUnavailable,
                 "version " + std::to_string(v) + " is required by version_policy but has no directory");
    }
    if (selection.load.empty()) return FailModel(name, "version_policy selects no version");
    auto fail_all = [&](const std::string& reason) {
      for (int64_t v : selection.load) SetVersion(name, v, ModelState::kUnavailable, reason);
    };

    Status status = CheckPlatform(&config);
    if (!status.ok()) return fail_all(status.message());
    auto settings = ReadSessionSettings(config);
    if (!settings.ok()) return fail_all(settings.status().message());
    auto instances = ExpandInstanceGroups(config);
    if (!instances.ok()) return fail_all(instances.status().message());

    for (int64_t v : selection.load) {
      SetVersion(name, v, ModelState::kLoading, "");
      Candidate c;
      c.name = name;
      c.version = v;
      c.model_dir = dir;
      const fs::path model_path = dir / std::to_string(v) / filename;
      if (!fs::is_regular_file(model_path, ec)) {
        SetVersion(name, v, ModelState::kUnavailable, "model file not found: " + model_path.string());
        continue;
      }
      c.model_path = model_path.string();
      auto signature = InspectModel(c.model_path);
      if (!signature.ok()) {
        SetVersion(name, v, ModelState::kUnavailable,
                   "cannot inspect " + filename + ": " + signature.status().message());
        continue;
      }
      c.config = config;
      AutoCompleteConfig(signature.value(), &c.config);
      status = ValidateConfigAgainstSignature(c.config, signature.value());
      if (!status.ok()) {
        SetVersion(name, v, ModelState::kUnavailable, status.message());
        continue;
      }
      auto scheduler_options = MakeSchedulerOptions(c.config, std::to_string(v));
      if (!scheduler_options.ok()) {
        SetVersion(name, v, ModelState::kUnavailable, scheduler_options.status().message());
        continue;
      }
      c.scheduler_options = std::move(scheduler_options).value();
      c.settings = settings.value();
      c.instances = instances.value();
      candidates->push_back(std::move(c));
    }
  }

  void Load(const Candidate& c, const ThreadPlanEntry& plan) {
    const auto start = std::chrono::steady_clock::now();
    const std::string version = std::to_string(c.version);
    const std::string label = c.name + ":" + version;
    auto fail = [&](const std::string& reason) {
      SetVersion(c.name, c.version, ModelState::kUnavailable, reason);
    };

    std::vector<std::unique_ptr<ModelInstance>> instances;
    for (size_t i = 0; i < c.instances.size(); ++i) {
      RuntimeOptions options = MakeRuntimeOptions(c.settings, plan.intra, c.instances[i], c.model_path,
                                                  label + "#" + std::to_string(i));
      auto instance = CreateOrtModelInstance(options);
      if (!instance.ok()) {
        return fail("cannot create instance #" + std::to_string(i) + ": " +
                    instance.status().message());
      }
      instances.push_back(std::move(instance).value());
    }

    auto samples = BuildWarmupSamples(c.config, c.model_dir);
    if (!samples.ok()) return fail("warm-up: " + samples.status().message());
    const bool configured_warmup = c.config.model_warmup_size() > 0;
    bool warmup_abandoned = false;
    for (size_t i = 0; i < instances.size() && !warmup_abandoned; ++i) {
      for (const WarmupSample& sample : samples.value()) {
        if (warmup_abandoned) break;
        for (int n = 0; n < sample.count; ++n) {
          std::vector<Tensor> outputs;
          Status st = instances[i]->Run(sample.inputs, &outputs);
          if (st.ok()) continue;
          if (!configured_warmup && sample.best_effort) {
            // Our guessed data (dynamic dims -> 1, empty strings) may simply be
            // invalid for this model; configure model_warmup to make it strict.
            spdlog::warn("model '{}': default warm-up '{}' with guessed data failed on "
                         "instance #{} ({}); skipping the default warm-up",
                         label, sample.name, i, st.message());
            warmup_abandoned = true;
            break;
          }
          return fail("warm-up '" + sample.name + "' failed on instance #" + std::to_string(i) +
                      ": " + st.message());
        }
      }
    }

    // Does the instance's output order differ from the config's outputs?
    std::vector<std::string> config_outputs;
    for (const auto& out : c.config.output()) config_outputs.push_back(out.name());
    const bool reorder = instances.front()->OutputNames() != config_outputs;

    auto model = std::make_shared<ModelImpl>(c.config, version, reorder);
    SchedulerOptions scheduler_options = c.scheduler_options;
    scheduler_options.compute_slots = compute_slots_;
    scheduler_options.compute_slots_per_run = plan.total_threads / std::max(1, plan.instances);
    auto scheduler = ModelScheduler::Create(std::move(scheduler_options), std::move(instances), &model->stats());
    if (!scheduler.ok()) return fail("cannot start scheduler: " + scheduler.status().message());
    model->Start(std::move(scheduler).value());
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    spdlog::info("model '{}' version {} READY in {} ms ({} instance(s), max_batch_size {}{})", c.name,
                 version, ms, c.instances.size(), c.config.max_batch_size(),
                 c.config.has_dynamic_batching() ? ", dynamic batching" : "");
    SetVersion(c.name, c.version, ModelState::kReady, "", std::move(model));
  }

  const RepositoryOptions options_;
  // The process's compute-thread budget, leased by every scheduler per run.
  const std::shared_ptr<ComputeSlots> compute_slots_;
  mutable std::shared_mutex mutex_;
  std::map<std::string, ModelRecord> models_;
};

}  // namespace

Result<std::unique_ptr<ModelRepository>> ModelRepository::Create(RepositoryOptions options) {
  std::error_code ec;
  if (options.repository_path.empty() || !fs::is_directory(options.repository_path, ec)) {
    return InvalidArgument("model repository '" + options.repository_path + "' is not a directory");
  }
  if (options.thread_budget <= 0) {
    options.thread_budget = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return std::unique_ptr<ModelRepository>(new ModelRepositoryImpl(std::move(options)));
}

}  // namespace ortserve

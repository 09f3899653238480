#include "repository/ModelRepository.h"

#include <algorithm>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "config/EnsembleGraph.h"
#include "repository/ListedModels.h"
#include "repository/ModelDirectory.h"
#include "repository/ModelLoader.h"
#include "repository/ModelSigning.h"
#include "repository/ModelTable.h"
#include "repository/OnDemandLoads.h"
#include "runtime/OrtModelInstance.h"
#include "serving/FallbackRouter.h"
#include "serving/ResponseCache.h"

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

const char* ModelControlModeName(ModelControlMode mode) {
  switch (mode) {
    case ModelControlMode::kNone: return "none";
    case ModelControlMode::kPoll: return "poll";
    case ModelControlMode::kExplicit: return "explicit";
  }
  return "unknown";
}

const char* LoadReasonName(LoadReason reason) {
  switch (reason) {
    case LoadReason::kStartup: return "startup";
    case LoadReason::kPoll: return "poll";
    case LoadReason::kExplicit: return "explicit";
    case LoadReason::kOnDemand: return "on_demand";
  }
  return "unknown";
}

Status UnknownModelError(const std::string& name, const std::string& version) {
  return NotFound("Request for unknown model: '" + name + "'" + (version.empty() ? "" : " version " + version) +
                  " is not found");
}

Status ModelNotReadyError(const std::string& name, const std::string& version, const std::string& reason) {
  std::string message = "Request for unknown model: '" + name + "'";
  message += version.empty() ? " has no available versions" : " version " + version + " is not at ready state";
  if (!reason.empty()) message += ": " + reason;
  return Unavailable(std::move(message));
}

Result<bool> IsModelVersionReady(const ModelRepository& repository, const std::string& name,
                                 const std::string& version) {
  Result<std::shared_ptr<Model>> model = repository.GetModel(name, version);
  if (model.ok()) return model.value()->ready();
  if (model.status().code() != StatusCode::kNotFound) return false;  // known, not ready
  const bool numeric = !version.empty() && std::all_of(version.begin(), version.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
  if (!version.empty() && !numeric) return model.status();
  // A model in the repository that loads on its first request is known too.
  if (repository.NeedsLoad(name)) return false;
  if (version.empty()) return model.status();
  // A version it does not have: not ready, unless the name itself is unknown.
  Result<std::shared_ptr<Model>> any = repository.GetModel(name, "");
  if (!any.ok() && any.status().code() == StatusCode::kNotFound) return any.status();
  return false;
}

Status VersionNotAvailableError(const std::string& name, const Status& why) {
  return InvalidArgument("requested model version is not available for model '" + name + "' (" + why.message() +
                         ")");
}

std::string ModelControlDisabledMessage(ModelControlMode mode) {
  if (mode == ModelControlMode::kPoll) {
    return "explicit model load / unload is not allowed if polling is enabled "
           "(the server runs with --model-control-mode=poll; use --model-control-mode=explicit)";
  }
  // Triton's words for every mode but explicit (core model_repository_manager.cc), which its L0_http and
  // L0_grpc tests match.
  return std::string("explicit model load / unload is not allowed if polling is enabled (the server runs with "
                     "--model-control-mode=") +
         ModelControlModeName(mode) + "; start it with --model-control-mode=explicit)";
}

Result<ModelRepository::ListedModel> ModelRepository::Listed(const std::string& name) const {
  return UnknownModelError(name, "");
}

void ModelRepository::LoadAsync(const std::string&, std::function<void(Status)> done) {
  done(Unavailable(ModelControlDisabledMessage(control_mode())));
}

void ModelRepository::UnloadAsync(const std::string&, std::function<void(Status)> done) {
  done(Unavailable(ModelControlDisabledMessage(control_mode())));
}

namespace {

Status Wait(const std::function<void(std::function<void(Status)>)>& start) {
  std::promise<Status> result;
  auto future = result.get_future();
  start([&result](Status st) { result.set_value(std::move(st)); });
  return future.get();
}

// The repository over a ModelTable (lookups and states) and a ModelLoader
// (everything that changes them).
class ModelRepositoryImpl final : public ModelRepository {
 public:
  explicit ModelRepositoryImpl(RepositoryOptions options)
      : options_(std::move(options)),
        fallbacks_(std::make_shared<FallbackLookup>(
            [this](const std::string& name) { return table_.LatestReady(name); })),
        models_(std::make_shared<ModelLookup>([this](const std::string& name, int64_t version) {
          return std::shared_ptr<Model>(table_.ReadyVersion(name, version));
        })),
        cache_(options_.response_cache_bytes > 0 ? std::make_shared<ResponseCache>(options_.response_cache_bytes)
                                                 : nullptr),
        on_demand_(options_.load_wait,
                   [this](const std::string& name, OnDemandLoads::Done done) {
                     // With model signing on, a load checks the signatures
                     // itself, right before it opens the files: the folder's
                     // stamp (sizes, mtimes) since a metadata request is no
                     // proof that the bytes are still the ones checked then.
                     ModelLoader::ReusePrepared reuse;
                     if (options_.signing.policy == SignaturePolicy::kOff) {
                       reuse = [this](const std::string& n) { return listed_.Reuse(n); };
                     }
                     loader_.LoadOnDemand(name, std::move(done), std::move(reuse));
                   },
                   [this](const std::string& name) { return ListedStamp(ModelDir(name)); }),
        loader_(&options_, &table_,
                ModelBuildContext{options_.model_cache_dir, std::make_shared<ComputeSlots>(options_.thread_budget),
                                  fallbacks_, cache_, models_}),
        listed_([this](const std::string& name) { return PrepareListed(name); },
                [this](const std::string& name) { return ListedStamp(ModelDir(name)); },
                [this](const std::string& name) {
                  std::error_code ec;
                  return !table_.HasReady(name, std::nullopt) && std::filesystem::is_directory(ModelDir(name), ec);
                }) {}
  ~ModelRepositoryImpl() override { Shutdown(); }

  void LoadAll() override {
    loader_.Run([this] { loader_.LoadAll(); });
  }

  Result<std::shared_ptr<Model>> GetModel(const std::string& name, const std::string& version) const override {
    return table_.Find(name, version);
  }

  std::vector<ModelIndexEntry> Index() const override {
    std::vector<ModelIndexEntry> out = table_.Index();
    if (options_.control_mode != ModelControlMode::kExplicit && !options_.load_on_demand) return out;
    // As Triton: the index also lists what could be loaded.
    std::set<std::string> known;
    for (const auto& e : out) known.insert(e.name);
    for (const auto& name : ListModelDirs(options_.repository_path)) {
      if (!known.count(name)) out.push_back({name, "", ModelState::kUnavailable, "not loaded"});
    }
    std::sort(out.begin(), out.end(),
              [](const ModelIndexEntry& a, const ModelIndexEntry& b) { return a.name < b.name; });
    return out;
  }

  std::vector<std::shared_ptr<Model>> ReadyModels() const override { return table_.ReadyModels(); }
  bool AllModelsReady() const override { return table_.AllReady(); }
  Result<RolloutStatus> Rollout(const std::string& name) const override { return table_.Rollout(name); }
  std::vector<RolloutStatus> Rollouts() const override { return table_.Rollouts(); }
  std::optional<ModelLoadStats> LoadStats() const override {
    ModelLoadStats stats;
    stats.loads = loader_.LoadCounts();
    stats.cold_start = on_demand_.ColdStarts();
    stats.evictions = loader_.Evictions();
    stats.memory_budget = options_.memory_budget;
    stats.memory = table_.Memory();
    return stats;
  }

  bool NeedsLoad(const std::string& name) const override {
    if (!options_.load_on_demand || !IsModelName(name)) return false;
    // A request on its way: the memory budget evicts this model last.
    const auto touch_at = options_.memory_budget > 0 ? std::optional(Clock::now()) : std::nullopt;
    if (table_.HasReady(name, touch_at)) return false;
    std::error_code ec;
    return std::filesystem::is_directory(ModelDir(name), ec);
  }
  Result<ListedModel> Listed(const std::string& name) const override {
    if (!NeedsLoad(name)) {
      listed_.Forget(name);
      return UnknownModelError(name, "");
    }
    return listed_.Get(name);
  }
  void WhenLoaded(const std::string& name, Clock::time_point deadline, std::function<void(Status)> done) override {
    if (!NeedsLoad(name)) return done(Status::Ok());
    on_demand_.Wait(name, deadline, std::move(done));
  }

  std::optional<ResponseCacheUsage> CacheUsage() const override {
    if (!cache_) return std::nullopt;
    return cache_->Usage();
  }

  using ModelRepository::Shutdown;
  void Shutdown(Clock::time_point abandon_at) override {
    fallbacks_->Detach();  // requests failing from here on answer their own error
    on_demand_.Stop();     // requests waiting for a load answer kUnavailable
    loader_.Stop();
    // Outside the table's lock: shutting down waits for in-flight requests
    // (all models share the one deadline). Ensembles first: their running
    // requests still have their composing models to finish on.
    ModelTable::Retired models = table_.TakeAllForShutdown();
    std::stable_partition(models.begin(), models.end(), [](const auto& m) { return IsEnsemble(m->config()); });
    for (auto& m : models) m->Shutdown(abandon_at);
    models_->Detach();
  }

  ModelControlMode control_mode() const override { return options_.control_mode; }
  void LoadAsync(const std::string& name, std::function<void(Status)> done) override {
    on_demand_.Forget(name);
    loader_.Control(name, /*load=*/true, std::move(done));
  }
  void UnloadAsync(const std::string& name, std::function<void(Status)> done) override {
    loader_.Control(name, /*load=*/false, std::move(done));
  }
  void Poll() override {
    loader_.Run([this] { loader_.PollNow(); });
  }

 private:
  std::filesystem::path ModelDir(const std::string& name) const {
    return std::filesystem::path(options_.repository_path) / name;
  }
  // Listed's answer from the model's folder, with the preparation for its
  // load (ListedModels keeps both).
  ListedModels::Prepared PrepareListed(const std::string& name) const {
    auto p = std::make_shared<const PreparedModel>(loader_.Prepare(name));
    if (!p->failure.empty() || p->candidates.empty()) {
      return {ModelNotReadyError(name, "", p->failure.empty() ? "no version to load" : p->failure), std::move(p)};
    }
    ListedModel listed{p->candidates.back().config, {}};
    for (const Candidate& c : p->candidates) listed.versions.push_back(std::to_string(c.version));
    return {std::move(listed), std::move(p)};
  }

  const RepositoryOptions options_;
  ModelTable table_;
  const std::shared_ptr<FallbackLookup> fallbacks_;
  const std::shared_ptr<ModelLookup> models_;
  const std::shared_ptr<ResponseCache> cache_;  // null: none
  OnDemandLoads on_demand_;  // before loader_: the loader's queued loads answer into it
  ModelLoader loader_;  // its thread starts once everything above exists
  mutable ListedModels listed_;  // --model-load-on-demand: the models not loaded, prepared
};

}  // namespace

Status ModelRepository::Load(const std::string& name) {
  return Wait([&](std::function<void(Status)> done) { LoadAsync(name, std::move(done)); });
}

Status ModelRepository::Unload(const std::string& name) {
  return Wait([&](std::function<void(Status)> done) { UnloadAsync(name, std::move(done)); });
}

Result<std::unique_ptr<ModelRepository>> ModelRepository::Create(RepositoryOptions options) {
  std::error_code ec;
  if (options.repository_path.empty() || !std::filesystem::is_directory(options.repository_path, ec)) {
    return InvalidArgument("model repository '" + options.repository_path + "' is not a directory");
  }
  if (options.signing.policy != SignaturePolicy::kOff && !options.signing.keys) {
    ORTSERVE_RETURN_IF_ERROR(LoadSigningKeys(&options.signing));
  }
  if (options.thread_budget <= 0) {
    options.thread_budget = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (options.shared_thread_pool) {
    Status pool = ConfigureSharedThreadPool(options.thread_budget);
    if (!pool.ok()) spdlog::warn("shared ORT thread pool: {}", pool.message());
  }
  return std::unique_ptr<ModelRepository>(new ModelRepositoryImpl(std::move(options)));
}

}  // namespace ortserve

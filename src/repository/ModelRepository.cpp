#include "repository/ModelRepository.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <thread>


#include "core/ThreadName.h"
#include "repository/ModelConfigUtil.h"
#include "repository/RequestValidator.h"
#include "repository/RuntimeConfig.h"
#include "repository/ThreadPlan.h"
#include "repository/VersionPolicy.h"
#include "repository/VersionWeights.h"
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

const char* ModelControlModeName(ModelControlMode mode) {
  switch (mode) {
    case ModelControlMode::kNone: return "none";
    case ModelControlMode::kPoll: return "poll";
    case ModelControlMode::kExplicit: return "explicit";
  }
  return "unknown";
}

std::string ModelControlDisabledMessage(ModelControlMode mode) {
  if (mode == ModelControlMode::kPoll) {
    return "explicit model load / unload is not allowed if polling is enabled "
           "(the server runs with --model-control-mode=poll; use --model-control-mode=explicit)";
  }
  return std::string("explicit model load / unload is not allowed in model control mode '") +
         ModelControlModeName(mode) + "' (start the server with --model-control-mode=explicit)";
}

void ModelRepository::LoadAsync(const std::string&, std::function<void(Status)> done) {
  done(Unavailable(ModelControlDisabledMessage(control_mode())));
}

void ModelRepository::UnloadAsync(const std::string&, std::function<void(Status)> done) {
  done(Unavailable(ModelControlDisabledMessage(control_mode())));
}

Status ModelRepository::Load(const std::string& name) {
  std::promise<Status> result;
  auto future = result.get_future();
  LoadAsync(name, [&result](Status st) { result.set_value(std::move(st)); });
  return future.get();
}

Status ModelRepository::Unload(const std::string& name) {
  std::promise<Status> result;
  auto future = result.get_future();
  UnloadAsync(name, [&result](Status st) { result.set_value(std::move(st)); });
  return future.get();
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

class ModelImpl;

// How a model finds its fallback at request time: the newest READY version of
// a model, while the repository exists. Shared by the repository and every
// model it loaded (a model may outlive the repository: then no fallback).
class FallbackLookup {
 public:
  using Find = std::function<std::shared_ptr<ModelImpl>(const std::string& name)>;
  explicit FallbackLookup(Find find) : find_(std::move(find)) {}
  std::shared_ptr<ModelImpl> Latest(const std::string& name) const {
    std::lock_guard lock(mu_);
    return find_ ? find_(name) : nullptr;
  }
  void Detach() {
    std::lock_guard lock(mu_);
    find_ = nullptr;
  }

 private:
  mutable std::mutex mu_;
  Find find_;  // guarded by mu_
};

class ModelImpl final : public Model {
 public:
  ModelImpl(inference::ModelConfig config, std::string version, bool reorder_outputs,
            std::shared_ptr<const FallbackLookup> fallback_lookup = nullptr)
      : shared_config_(std::make_shared<const inference::ModelConfig>(std::move(config))),
        config_(*shared_config_),
        version_(std::move(version)),
        stats_(config_.max_batch_size()),
        output_reshape_(HasOutputReshape(config_)),
        reorder_outputs_(reorder_outputs),
        fallback_name_(FallbackModelName(config_)),
        fallback_lookup_(fallback_name_.empty() ? nullptr : std::move(fallback_lookup)) {}

  ~ModelImpl() override { Shutdown(); }

  const std::string& name() const override { return config_.name(); }
  const std::string& version() const override { return version_; }
  const inference::ModelConfig& config() const override { return config_; }
  ModelStatistics& stats() override { return stats_; }
  bool ready() const override { return state_.load(std::memory_order_acquire) == ModelState::kReady; }
  size_t QueueDepth() const override { return scheduler_ ? scheduler_->QueueDepth() : 0; }
  size_t BusyInstances() const override { return scheduler_ ? scheduler_->BusyInstances() : 0; }

  void Start(std::unique_ptr<ModelScheduler> scheduler) {
    scheduler_ = std::move(scheduler);
    state_.store(ModelState::kReady, std::memory_order_release);
  }

  void Shutdown(Clock::time_point abandon_at = Clock::time_point::max()) {
    state_.store(ModelState::kUnloading, std::memory_order_release);
    if (scheduler_) scheduler_->Shutdown(abandon_at);
  }

  void Infer(std::unique_ptr<InferenceRequest> request) override {
    InferWith(std::move(request), /*allow_fallback=*/fallback_lookup_ != nullptr);
  }

  // Serves `request` here, never handing it to a fallback (the one hop).
  void InferDirect(std::unique_ptr<InferenceRequest> request) {
    InferWith(std::move(request), /*allow_fallback=*/false);
  }

 private:
  void InferWith(std::unique_ptr<InferenceRequest> request, bool allow_fallback) {
    if (!request) return;
    Status status;
    std::shared_ptr<InferenceRequest> spare;  // the request as the client sent it, for a fallback
    if (!ready()) {
      status = Unavailable("model '" + name() + "' version '" + version_ + "' is not ready");
    } else {
      status = ValidateRequest(config_, *request);
      if (status.ok() && allow_fallback) spare = SpareCopy(*request);
      if (status.ok()) status = ApplyInputReshape(config_, request.get());
    }
    if (!status.ok()) {
      const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
          Clock::now() - request->arrival_time);
      stats_.fail.Add(static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count())));
      stats_.CountOutcome(OutcomeOfFailure(status));  // invalid_input, or rejected when not ready
      CompletionCallback done = std::move(request->on_complete);
      if (done) done(status);
      return;
    }
    CompletionCallback client_done = spare ? request->on_complete : CompletionCallback();
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
    if (!spare) {
      scheduler_->Submit(std::move(request));
      return;
    }

    spare->on_complete = std::move(client_done);
    if (scheduler_->ExpectedToMissDeadline(*request) &&
        HandToFallback(spare, FallbackReason::kExpectedWait)) {
      return;
    }
    // A failed run is retried once on the fallback. The callback runs on a
    // worker of this model's scheduler, which this model outlives.
    request->on_complete = [this, spare, done = std::move(request->on_complete)](
                               Result<InferenceResponse> result) mutable {
      if (!result.ok() && result.status().code() == StatusCode::kInternal &&
          HandToFallback(spare, FallbackReason::kRunFailed)) {
        return;
      }
      done(std::move(result));
    };
    Status full = scheduler_->TrySubmit(request);
    if (full.ok()) return;
    if (HandToFallback(spare, FallbackReason::kQueueFull)) return;
    // No fallback to take it: answered as the scheduler answers a full queue.
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - request->arrival_time);
    stats_.fail.Add(static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count())));
    stats_.CountOutcome(RequestOutcome::kRejected);
    CompletionCallback done = std::move(spare->on_complete);
    if (done) done(std::move(full));
  }

  // Everything the fallback needs, copied before this model's input reshape:
  // input data is shared, not copied.
  static std::shared_ptr<InferenceRequest> SpareCopy(const InferenceRequest& request) {
    auto spare = std::make_shared<InferenceRequest>();
    spare->model_name = request.model_name;
    spare->id = request.id;
    spare->inputs = request.inputs;
    spare->requested_outputs = request.requested_outputs;
    spare->timeout_us = request.timeout_us;
    spare->priority = request.priority;
    spare->arrival_time = request.arrival_time;
    spare->cancelled = request.cancelled;
    spare->trace = request.trace;  // a fallback answer is traced like the original
    return spare;
  }

  // Sends the spare request to the newest READY version of the fallback
  // model; false (and nothing done) when there is none or it is not
  // compatible. The client's timeout keeps counting from its arrival.
  bool HandToFallback(const std::shared_ptr<InferenceRequest>& spare, FallbackReason reason) {
    std::shared_ptr<ModelImpl> fallback = fallback_lookup_->Latest(fallback_name_);
    if (!fallback || fallback.get() == this) return false;
    Status compatible = CheckFallbackCompatible(config_, fallback->config());
    if (!compatible.ok()) {
      spdlog::warn("model '{}': fallback model '{}' is not compatible ({}); not used", name(),
                   fallback_name_, compatible.message());
      return false;
    }
    auto request = std::make_unique<InferenceRequest>(*spare);
    request->model_version.clear();
    request->model_name = fallback_name_;
    if (request->timeout_us != 0) {
      const auto elapsed_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                  Clock::now() - request->arrival_time).count();
      request->timeout_us = elapsed_us <= 0 ? request->timeout_us
                            : static_cast<uint64_t>(elapsed_us) >= request->timeout_us
                                ? 1
                                : request->timeout_us - static_cast<uint64_t>(elapsed_us);
    }
    request->on_complete = [from = name(), done = std::move(request->on_complete)](
                               Result<InferenceResponse> result) {
      if (result.ok()) result.value().parameters.emplace_back("ortserve_fallback_from", from);
      if (done) done(std::move(result));
    };
    stats_.CountFallback(reason);
    fallback->InferDirect(std::move(request));
    return true;
  }

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
  const std::string fallback_name_;  // empty: none
  const std::shared_ptr<const FallbackLookup> fallback_lookup_;  // null: no fallback
  std::atomic<ModelState> state_{ModelState::kLoading};
  std::unique_ptr<ModelScheduler> scheduler_;
};

// mtime (ns) and size of a file, "-" when it is missing: what "changed" means
// to a reload or a poll.
std::string FileStamp(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return "-";
  const auto mtime = fs::last_write_time(path, ec);
  if (ec) return "-";
  return std::to_string(mtime.time_since_epoch().count()) + ":" + std::to_string(size);
}

// Everything a poll compares: config.pbtxt and every file of every version
// directory (names, mtimes, sizes). Cheap: no file is read.
std::string DirectoryStamp(const fs::path& dir) {
  std::string stamp = "config=" + FileStamp(dir / "config.pbtxt");
  std::error_code ec;
  std::vector<std::string> items;
  for (const auto& version : fs::directory_iterator(dir, ec)) {
    std::error_code vec;
    if (!version.is_directory(vec) || !ParseVersionDir(version.path().filename().string())) continue;
    items.push_back(version.path().filename().string() + "/");
    for (const auto& file : fs::directory_iterator(version.path(), vec)) {
      items.push_back(version.path().filename().string() + "/" + file.path().filename().string() + "=" +
                      FileStamp(file.path()));
    }
  }
  std::sort(items.begin(), items.end());
  for (const auto& i : items) stamp += ";" + i;
  return stamp;
}

struct VersionRecord {
  ModelState state = ModelState::kLoading;
  std::string reason;
  std::shared_ptr<ModelImpl> model;
  std::string stamp;   // config + model file the serving model was loaded from
  int instances = 0;   // of the serving model, for the dynamic thread plan
};

struct ModelRecord {
  std::string reason;  // failure before any version could be considered
  std::map<int64_t, VersionRecord> versions;
  // Canary split of unversioned requests; null: the newest ready version.
  std::shared_ptr<WeightedVersionPicker> canary;
  bool unloaded = false;    // by request: not counted by AllModelsReady
  std::string dir_stamp;    // DirectoryStamp at the last sync (poll)
};

// A model version whose config is complete and checked, waiting to be loaded.
struct Candidate {
  std::string name;
  int64_t version = 0;
  fs::path model_dir;
  std::string model_path;
  std::string stamp;
  inference::ModelConfig config;
  OrtSessionSettings settings;
  std::vector<InstanceSpec> instances;
  SchedulerOptions scheduler_options;
  std::optional<ThreadPlanEntry> plan;  // set by the startup plan
};

// What Prepare() found in one model directory; nothing is published yet.
struct PreparedModel {
  std::string name;
  std::string dir_stamp;
  std::string failure;                          // the whole model failed
  std::map<int64_t, std::string> version_failures;
  std::vector<Candidate> candidates;
  std::shared_ptr<WeightedVersionPicker> canary;
};

bool IsModelName(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

class ModelRepositoryImpl final : public ModelRepository {
 public:
  explicit ModelRepositoryImpl(RepositoryOptions options)
      : options_(std::move(options)),
        compute_slots_(std::make_shared<ComputeSlots>(options_.thread_budget)),
        fallback_lookup_(std::make_shared<FallbackLookup>(
            [this](const std::string& name) { return LatestReady(name); })),
        loader_([this] { LoaderLoop(); }) {}
  ~ModelRepositoryImpl() override { Shutdown(); }

  void LoadAll() override {
    RunOnLoader([this] { InitialLoad(); });
  }

  Result<std::shared_ptr<Model>> GetModel(const std::string& name,
                                          const std::string& version) const override {
    std::shared_lock lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) return NotFound("unknown model '" + name + "'");
    const ModelRecord& record = it->second;
    if (version.empty()) {
      if (record.canary) {
        auto picked = record.canary->Pick([&](int64_t v) {
          auto found = record.versions.find(v);
          return found != record.versions.end() && found->second.state == ModelState::kReady;
        });
        if (picked) return std::shared_ptr<Model>(record.versions.at(*picked).model);
      }
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
    std::vector<ModelIndexEntry> out;
    std::set<std::string> known;
    {
      std::shared_lock lock(mutex_);
      for (const auto& [name, record] : models_) {
        known.insert(name);
        if (record.versions.empty()) {
          out.push_back({name, "", ModelState::kUnavailable, record.reason});
        }
        for (const auto& [number, v] : record.versions) {
          out.push_back({name, std::to_string(number), v.state, v.reason});
        }
      }
    }
    if (options_.control_mode == ModelControlMode::kExplicit) {
      // As Triton: the index also lists what could be loaded.
      for (const auto& name : ListModelDirs()) {
        if (!known.count(name)) out.push_back({name, "", ModelState::kUnavailable, "not loaded"});
      }
      std::sort(out.begin(), out.end(), [](const ModelIndexEntry& a, const ModelIndexEntry& b) {
        return a.name < b.name;
      });
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
      if (record.unloaded) continue;
      if (record.versions.empty()) return false;
      for (const auto& [number, v] : record.versions) {
        if (v.state != ModelState::kReady) return false;
      }
    }
    return true;
  }

  using ModelRepository::Shutdown;
  void Shutdown(Clock::time_point abandon_at) override {
    fallback_lookup_->Detach();  // requests failing from here on answer their own error
    StopLoader();
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
    // Outside the lock: shutting down waits for in-flight requests (all
    // models share the one deadline).
    for (auto& m : models) m->Shutdown(abandon_at);
  }

  ModelControlMode control_mode() const override { return options_.control_mode; }

  void LoadAsync(const std::string& name, std::function<void(Status)> done) override {
    Control(name, std::move(done), /*load=*/true);
  }

  void UnloadAsync(const std::string& name, std::function<void(Status)> done) override {
    Control(name, std::move(done), /*load=*/false);
  }

  void Poll() override {
    RunOnLoader([this] { PollNow(); });
  }

 private:
  // The newest READY version of `name` (a fallback ignores canary weights).
  std::shared_ptr<ModelImpl> LatestReady(const std::string& name) const {
    std::shared_lock lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) return nullptr;
    for (auto v = it->second.versions.rbegin(); v != it->second.versions.rend(); ++v) {
      if (v->second.state == ModelState::kReady && v->second.model) return v->second.model;
    }
    return nullptr;
  }

  // ---- the loader thread ---------------------------------------------------

  // A queued job; `cancelled` when the repository shuts down first.
  using Task = std::function<void(bool cancelled)>;

  void Enqueue(Task task) {
    {
      std::lock_guard lock(loader_mu_);
      if (!loader_stopping_) {
        tasks_.push_back(std::move(task));
        loader_cv_.notify_all();
        return;
      }
    }
    task(true);
  }

  // Runs `fn` on the loader thread and waits for it (inline when already there).
  void RunOnLoader(std::function<void()> fn) {
    if (std::this_thread::get_id() == loader_.get_id()) return fn();
    std::promise<void> finished;
    auto future = finished.get_future();
    Enqueue([&](bool cancelled) {
      if (!cancelled) fn();
      finished.set_value();
    });
    future.wait();
  }

  void LoaderLoop() {
    SetCurrentThreadName("model-loader");
    const bool poll = options_.control_mode == ModelControlMode::kPoll;
    const auto interval = std::max(options_.poll_interval, std::chrono::milliseconds(1));
    auto next_poll = std::chrono::steady_clock::now() + interval;
    std::unique_lock lock(loader_mu_);
    while (!loader_stopping_) {
      if (!tasks_.empty()) {
        Task task = std::move(tasks_.front());
        tasks_.pop_front();
        lock.unlock();
        task(false);
        lock.lock();
        continue;
      }
      if (poll && initial_load_done_) {
        if (std::chrono::steady_clock::now() >= next_poll) {
          lock.unlock();
          PollNow();
          lock.lock();
          next_poll = std::chrono::steady_clock::now() + interval;
          continue;
        }
        loader_cv_.wait_until(lock, next_poll);
      } else {
        loader_cv_.wait(lock);
      }
    }
    std::deque<Task> left = std::move(tasks_);
    lock.unlock();
    for (Task& task : left) task(true);
  }

  void StopLoader() {
    {
      std::lock_guard lock(loader_mu_);
      loader_stopping_ = true;
      loader_cv_.notify_all();
    }
    if (loader_.joinable() && std::this_thread::get_id() != loader_.get_id()) loader_.join();
  }

  void Control(const std::string& name, std::function<void(Status)> done, bool load) {
    if (options_.control_mode != ModelControlMode::kExplicit) {
      return done(Unavailable(ModelControlDisabledMessage(options_.control_mode)));
    }
    if (!IsModelName(name)) {
      return done(InvalidArgument("'" + name + "' is not a model name (a directory of the model repository)"));
    }
    Enqueue([this, name, load, done = std::move(done)](bool cancelled) {
      if (cancelled) {
        return done(Unavailable("server is shutting down; model '" + name + "' was not " +
                                (load ? "loaded" : "unloaded")));
      }
      done(load ? LoadNow(name) : UnloadNow(name, /*forget=*/false));
    });
  }

  // ---- loads and unloads (loader thread only) -----------------------------

  std::vector<std::string> ListModelDirs() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(options_.repository_path, ec)) {
      const std::string name = entry.path().filename().string();
      std::error_code dir_ec;
      if (!IsModelName(name) || !entry.is_directory(dir_ec)) continue;
      names.push_back(name);
    }
    if (ec) {
      spdlog::error("cannot list model repository {}: {}", options_.repository_path, ec.message());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  void InitialLoad() {
    std::vector<std::string> names = ListModelDirs();
    spdlog::info("model control mode {}{}", ModelControlModeName(options_.control_mode),
                 options_.control_mode == ModelControlMode::kPoll
                     ? " (repository polled every " + std::to_string(options_.poll_interval.count()) + " ms)"
                     : "");
    if (options_.control_mode == ModelControlMode::kExplicit) {
      const auto& wanted = options_.startup_models;
      if (std::find(wanted.begin(), wanted.end(), "*") == wanted.end()) {
        std::vector<std::string> chosen;
        for (const auto& w : wanted) {
          if (std::find(names.begin(), names.end(), w) != names.end()) {
            chosen.push_back(w);
          } else {
            spdlog::error("--load-model '{}': no such model directory in {}", w, options_.repository_path);
            std::unique_lock lock(mutex_);
            models_[w].reason = "--load-model names it but the model repository has no directory '" + w + "'";
          }
        }
        names = std::move(chosen);
        spdlog::info("model control mode explicit: loading {} model(s) at startup", names.size());
      }
    }

    // Parse and check every config first: the thread plan needs the total
    // instance count before any session is created.
    std::vector<PreparedModel> prepared;
    for (const auto& name : names) prepared.push_back(Prepare(name));

    std::vector<ThreadPlanRequest> requests;
    for (const auto& p : prepared) {
      for (const auto& c : p.candidates) requests.push_back(PlanRequest(c));
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
    size_t i = 0;
    for (auto& p : prepared) {
      for (auto& c : p.candidates) c.plan = plan.entries[i++];
    }
    // Fallback models load before the models that name them, so that a
    // primary's load can check its fallback's inputs and outputs.
    std::set<std::string> fallbacks;
    for (const auto& p : prepared)
      for (const auto& c : p.candidates)
        if (auto f = FallbackModelName(c.config); !f.empty()) fallbacks.insert(f);
    std::stable_partition(prepared.begin(), prepared.end(),
                          [&](const PreparedModel& p) { return fallbacks.count(p.name) > 0; });
    // Publish every model's LOADING/UNAVAILABLE states before the first load.
    for (auto& p : prepared) Publish(p);
    for (auto& p : prepared) (void)LoadCandidates(p);
    {
      std::lock_guard lock(loader_mu_);
      initial_load_done_ = true;
    }
  }

  Status LoadNow(const std::string& name) {
    std::error_code ec;
    if (!fs::is_directory(fs::path(options_.repository_path) / name, ec)) {
      return NotFound("failed to load '" + name + "': no model directory '" + name + "' in the model repository " +
                      options_.repository_path);
    }
    PreparedModel p = Prepare(name);
    Publish(p);
    return LoadCandidates(p);
  }

  // Stops new requests to every version of `name`, waits for the running ones,
  // then drops the model (`forget`: its directory is gone) or marks it unloaded.
  Status UnloadNow(const std::string& name, bool forget) {
    std::vector<std::shared_ptr<ModelImpl>> retired;
    {
      std::unique_lock lock(mutex_);
      auto it = models_.find(name);
      if (it == models_.end()) {
        std::error_code ec;
        if (fs::is_directory(fs::path(options_.repository_path) / name, ec)) return Status::Ok();
        return NotFound("failed to unload '" + name + "': unknown model");
      }
      for (auto& [number, v] : it->second.versions) {
        if (v.model) retired.push_back(v.model);
        v.state = ModelState::kUnloading;
        v.reason.clear();
      }
      it->second.canary.reset();
    }
    spdlog::info("model '{}': unloading {} version(s){}", name, retired.size(),
                 forget ? " (removed from the model repository)" : "");
    for (auto& m : retired) m->Shutdown();  // waits for in-flight requests
    std::unique_lock lock(mutex_);
    if (forget) {
      models_.erase(name);
    } else {
      ModelRecord& record = models_[name];
      record = ModelRecord{};
      record.reason = "unloaded";
      record.unloaded = true;
    }
    spdlog::info("model '{}' unloaded", name);
    return Status::Ok();
  }

  void PollNow() {
    const std::vector<std::string> names = ListModelDirs();
    std::vector<std::string> gone;
    std::map<std::string, std::string> stamps;
    {
      std::shared_lock lock(mutex_);
      for (const auto& [name, record] : models_) {
        if (!std::binary_search(names.begin(), names.end(), name)) gone.push_back(name);
        stamps[name] = record.dir_stamp;
      }
    }
    for (const auto& name : gone) (void)UnloadNow(name, /*forget=*/true);
    for (const auto& name : names) {
      const fs::path dir = fs::path(options_.repository_path) / name;
      auto known = stamps.find(name);
      if (known != stamps.end() && known->second == DirectoryStamp(dir)) continue;
      spdlog::info("poll: model '{}' {}", name, known == stamps.end() ? "added" : "changed");
      PreparedModel p = Prepare(name);
      Publish(p);
      (void)LoadCandidates(p);
    }
  }

  // Applies what Prepare() found, before any session is created: failures,
  // versions no longer selected (unloaded), LOADING for new versions. A version
  // or model that fails while an older load of it is READY keeps that one.
  void Publish(PreparedModel& p) {
    std::vector<std::shared_ptr<ModelImpl>> retired;
    {
      std::unique_lock lock(mutex_);
      ModelRecord& record = models_[p.name];
      record.unloaded = false;
      record.dir_stamp = p.dir_stamp;
      if (record.reason == "unloaded") record.reason.clear();
      bool serving = false;
      for (const auto& [number, v] : record.versions) serving |= v.state == ModelState::kReady;
      if (!p.failure.empty()) {
        spdlog::error("model '{}' {}: {}", p.name,
                      serving ? "failed to reload; its previous load keeps serving" : "is UNAVAILABLE", p.failure);
        if (!serving) {
          for (auto& [number, v] : record.versions) {
            if (v.model) retired.push_back(v.model);
          }
          record.versions.clear();
          record.reason = p.failure;
          record.canary.reset();
        } else {
          for (auto& [number, v] : record.versions) {
            if (v.state == ModelState::kReady) v.reason = KeptReason(p.failure);
          }
        }
        p.candidates.clear();
      } else {
        record.reason.clear();
        record.canary = p.canary;
        std::set<int64_t> wanted;
        for (const auto& c : p.candidates) wanted.insert(c.version);
        for (const auto& [v, why] : p.version_failures) wanted.insert(v);
        for (auto it = record.versions.begin(); it != record.versions.end();) {
          if (wanted.count(it->first)) {
            ++it;
            continue;
          }
          spdlog::info("model '{}' version {} is no longer selected; unloading it", p.name, it->first);
          if (it->second.model) retired.push_back(it->second.model);
          it = record.versions.erase(it);
        }
        for (const auto& [version, why] : p.version_failures) {
          VersionRecord& v = record.versions[version];
          spdlog::error("model '{}' version {} {}: {}", p.name, version,
                        v.state == ModelState::kReady ? "failed to reload; the previous load keeps serving"
                                                      : "is UNAVAILABLE",
                        why);
          if (v.state == ModelState::kReady) {
            v.reason = KeptReason(why);
          } else {
            if (v.model) retired.push_back(v.model);
            v = VersionRecord{ModelState::kUnavailable, why, nullptr, "", 0};
          }
        }
        std::vector<Candidate> to_load;
        for (auto& c : p.candidates) {
          VersionRecord& v = record.versions[c.version];
          if (v.state == ModelState::kReady && v.stamp == c.stamp) {
            v.reason.clear();  // unchanged: keeps serving
            continue;
          }
          if (v.state != ModelState::kReady) v.state = ModelState::kLoading;
          to_load.push_back(std::move(c));
        }
        p.candidates = std::move(to_load);
      }
    }
    for (auto& m : retired) m->Shutdown();
  }

  static std::string KeptReason(const std::string& why) {
    return "reload failed, the previous load keeps serving: " + why;
  }

  // Loads and warms each candidate beside whatever serves now, then swaps it
  // in under the map lock. OK when every candidate and version is READY.
  Status LoadCandidates(const PreparedModel& p) {
    std::vector<std::string> failures;
    if (!p.failure.empty()) failures.push_back(p.failure);
    for (const auto& [v, why] : p.version_failures) failures.push_back("version " + std::to_string(v) + ": " + why);
    for (const Candidate& c : p.candidates) {
      const ThreadPlanEntry plan = c.plan ? *c.plan : DynamicPlan(c);
      auto loaded = LoadCandidate(c, plan);
      std::shared_ptr<ModelImpl> old;
      bool kept = false;
      {
        std::unique_lock lock(mutex_);
        VersionRecord& v = models_[c.name].versions[c.version];
        if (loaded.ok()) {
          old = std::move(v.model);
          v = VersionRecord{ModelState::kReady, "", std::move(loaded).value(), c.stamp,
                            static_cast<int>(c.instances.size())};
        } else if (v.state == ModelState::kReady) {
          kept = true;
          v.reason = KeptReason(loaded.status().message());
        } else {
          v.state = ModelState::kUnavailable;
          v.reason = loaded.status().message();
        }
      }
      if (!loaded.ok()) {
        spdlog::error("model '{}' version {} {}: {}", c.name, c.version,
                      kept ? "failed to reload; the previous load keeps serving" : "is UNAVAILABLE",
                      loaded.status().message());
        failures.push_back("version " + std::to_string(c.version) + ": " + loaded.status().message());
      } else if (old) {
        spdlog::info("model '{}' version {} reloaded; the previous load drains and unloads", c.name, c.version);
        old->Shutdown();  // waits for its in-flight requests
      }
    }
    if (failures.empty()) return Status::Ok();
    std::string message = "failed to load '" + p.name + "': " + Join(failures);
    return InvalidArgument(std::move(message));
  }

  static ThreadPlanRequest PlanRequest(const Candidate& c) {
    ThreadPlanRequest r;
    r.label = c.name + ":" + std::to_string(c.version);
    r.instances = static_cast<int>(c.instances.size());
    r.explicit_intra = c.settings.intra_op_threads;
    r.inter = c.settings.inter_op_threads;
    r.parallel_execution = c.settings.execution_mode == ExecutionMode::kParallel;
    r.allow_spinning = c.settings.allow_spinning;
    return r;
  }

  // A model loaded after startup gets the same plan as at startup (the rule
  // does not depend on the other models; compute slots arbitrate between them).
  ThreadPlanEntry DynamicPlan(const Candidate& c) const {
    ThreadPlan plan = ThreadPlan::Compute(options_.thread_budget, {PlanRequest(c)});
    spdlog::info("thread plan: {} (loaded at run time)", plan.Describe().front());
    return plan.entries.front();
  }

  PreparedModel Prepare(const std::string& name) {
    PreparedModel p;
    p.name = name;
    const fs::path dir = fs::path(options_.repository_path) / name;
    p.dir_stamp = DirectoryStamp(dir);
    auto fail = [&](const std::string& reason) {
      p.failure = reason;
      return std::move(p);
    };
    inference::ModelConfig config;
    const fs::path config_path = dir / "config.pbtxt";
    std::error_code ec;
    if (fs::exists(config_path, ec)) {
      auto text = ReadFile(config_path);
      if (!text.ok()) return fail(text.status().message());
      auto parsed = ParseModelConfig(text.value(), "config.pbtxt");
      if (!parsed.ok()) return fail(parsed.status().message());
      config = std::move(parsed).value();
    }
    if (config.name().empty()) {
      config.set_name(name);
    } else if (config.name() != name) {
      return fail("config.pbtxt names the model '" + config.name() + "' but its directory is '" + name +
                  "'; they must be equal");
    }
    const auto ignored = IgnoredConfigFields(config);
    if (!ignored.empty()) {
      spdlog::warn("model '{}': ignoring config fields not used for ONNX serving: {}", name,
                   Join(ignored));
    }
    std::vector<std::string> unknown_params;
    for (const auto& [key, value] : config.parameters()) {
      if (!IsKnownParameter(key) && key != kVersionWeightsParameter) unknown_params.push_back(key);
    }
    std::sort(unknown_params.begin(), unknown_params.end());
    if (!unknown_params.empty()) {
      spdlog::warn("model '{}': ignoring unknown parameters: {}", name, Join(unknown_params));
    }
    if (auto w = config.parameters().find(kVersionWeightsParameter); w != config.parameters().end()) {
      auto weights = ParseVersionWeights(w->second.string_value());
      if (!weights.ok()) return fail(weights.status().message());
      p.canary = std::make_shared<WeightedVersionPicker>(std::move(weights).value());
    }
    std::string filename = config.default_model_filename().empty()
                               ? std::string(kDefaultModelFilename)
                               : config.default_model_filename();
    if (filename.find('/') != std::string::npos || filename == "." || filename == "..") {
      return fail("default_model_filename '" + filename + "' must be a file name inside the version directory");
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
    if (available.empty()) return fail("no version directories (positive integers) in " + dir.string());
    const VersionSelection selection = SelectVersions(config.version_policy(), available);
    for (int64_t v : selection.missing) {
      p.version_failures[v] = "version " + std::to_string(v) + " is required by version_policy but has no directory";
    }
    if (selection.load.empty()) return fail("version_policy selects no version");
    auto fail_all = [&](const std::string& reason) {
      for (int64_t v : selection.load) p.version_failures[v] = reason;
      return std::move(p);
    };

    Status status = CheckPlatform(&config);
    if (!status.ok()) return fail_all(status.message());
    auto settings = ReadSessionSettings(config);
    if (!settings.ok()) return fail_all(settings.status().message());
    auto instances = ExpandInstanceGroups(config);
    if (!instances.ok()) return fail_all(instances.status().message());

    const std::string config_stamp = FileStamp(config_path);
    for (int64_t v : selection.load) {
      Candidate c;
      c.name = name;
      c.version = v;
      c.model_dir = dir;
      const fs::path model_path = dir / std::to_string(v) / filename;
      if (!fs::is_regular_file(model_path, ec)) {
        p.version_failures[v] = "model file not found: " + model_path.string();
        continue;
      }
      c.model_path = model_path.string();
      c.stamp = config_stamp + "|" + FileStamp(model_path);
      auto signature = InspectModel(c.model_path);
      if (!signature.ok()) {
        p.version_failures[v] = "cannot inspect " + filename + ": " + signature.status().message();
        continue;
      }
      c.config = config;
      AutoCompleteConfig(signature.value(), &c.config);
      status = ValidateConfigAgainstSignature(c.config, signature.value());
      if (!status.ok()) {
        p.version_failures[v] = status.message();
        continue;
      }
      auto scheduler_options = MakeSchedulerOptions(c.config, std::to_string(v));
      if (!scheduler_options.ok()) {
        p.version_failures[v] = scheduler_options.status().message();
        continue;
      }
      c.scheduler_options = std::move(scheduler_options).value();
      c.settings = settings.value();
      c.instances = instances.value();
      p.candidates.push_back(std::move(c));
    }
    return p;
  }

  // Creates the instances, warms them and starts the scheduler; publishes nothing.
  Result<std::shared_ptr<ModelImpl>> LoadCandidate(const Candidate& c, const ThreadPlanEntry& plan) {
    const auto start = std::chrono::steady_clock::now();
    const std::string version = std::to_string(c.version);
    const std::string label = c.name + ":" + version;
    auto fail = [](const std::string& reason) -> Result<std::shared_ptr<ModelImpl>> {
      return Unavailable(reason);
    };
    if (const std::string fallback = FallbackModelName(c.config); !fallback.empty()) {
      if (fallback == c.name) return fail("parameter fallback_model names the model itself");
      if (auto target = LatestReady(fallback)) {
        Status compatible = CheckFallbackCompatible(c.config, target->config());
        if (!compatible.ok()) {
          return fail("fallback_model '" + fallback + "' cannot serve this model's requests: " +
                      compatible.message());
        }
        spdlog::info("model '{}': fallback model '{}' (version {} checked compatible)", label, fallback,
                     target->version());
      } else {
        spdlog::warn("model '{}': fallback model '{}' is not loaded; requests fall back to it once it "
                     "is READY (and compatible)", label, fallback);
      }
    }

    std::vector<std::unique_ptr<ModelInstance>> instances;
    for (size_t i = 0; i < c.instances.size(); ++i) {
      RuntimeOptions options = MakeRuntimeOptions(c.settings, plan.intra, c.instances[i], c.model_path,
                                                  label + "#" + std::to_string(i),
                                                  options_.model_cache_dir);
      // ORT's intra-op threads are created here and inherit this name.
      ScopedThreadName ort_threads("ort-" + c.name);
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
    for (auto& instance : instances) instance->FinishWarmup();

    // Does the instance's output order differ from the config's outputs?
    std::vector<std::string> config_outputs;
    for (const auto& out : c.config.output()) config_outputs.push_back(out.name());
    const bool reorder = instances.front()->OutputNames() != config_outputs;

    auto model = std::make_shared<ModelImpl>(c.config, version, reorder, fallback_lookup_);
    SchedulerOptions scheduler_options = c.scheduler_options;
    scheduler_options.compute_slots = compute_slots_;
    scheduler_options.compute_slots_per_run = plan.total_threads / std::max(1, plan.instances);
    scheduler_options.balance_across_instances =
        std::none_of(c.instances.begin(), c.instances.end(), [](const InstanceSpec& i) { return i.gpu; });
    auto scheduler = ModelScheduler::Create(std::move(scheduler_options), std::move(instances), &model->stats());
    if (!scheduler.ok()) return fail("cannot start scheduler: " + scheduler.status().message());
    model->stats().load_duration_ns.store(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()));
    model->Start(std::move(scheduler).value());
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    spdlog::info("model '{}' version {} READY in {} ms ({} instance(s), max_batch_size {}{})", c.name,
                 version, ms, c.instances.size(), c.config.max_batch_size(),
                 c.config.has_dynamic_batching() ? ", dynamic batching" : "");
    return model;
  }

  const RepositoryOptions options_;
  // The process's compute-thread budget, leased by every scheduler per run.
  const std::shared_ptr<ComputeSlots> compute_slots_;
  const std::shared_ptr<FallbackLookup> fallback_lookup_;
  mutable std::shared_mutex mutex_;
  std::map<std::string, ModelRecord> models_;  // guarded by mutex_; written on the loader thread

  std::mutex loader_mu_;
  std::condition_variable loader_cv_;
  std::deque<Task> tasks_;          // guarded by loader_mu_
  bool loader_stopping_ = false;    // guarded by loader_mu_
  bool initial_load_done_ = false;  // guarded by loader_mu_: polling starts after LoadAll
  std::thread loader_;              // last: starts once everything above exists
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

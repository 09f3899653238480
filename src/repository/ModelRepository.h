#pragma once
// The model repository: lookup and model states over a Triton-layout folder
// (<repo>/<model>/<version>/model.onnx, optional <repo>/<model>/config.pbtxt).
// It hands out refcounted handles (serving/Model.h), so an unload never
// frees a model under a running request; its loader (repository/ModelLoader.h)
// scans, prepares, loads, warms and publishes models on a thread of its own.
// The front ends see this header and Model.h only.
#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/ConfigAutoComplete.h"
#include "core/Histogram.h"
#include "core/InferenceRequest.h"
#include "core/ModelStatistics.h"
#include "core/Status.h"
#include "serving/Model.h"
#include "serving/VersionRollout.h"

namespace ortserve {

struct ModelIndexEntry {
  std::string name;
  std::string version;  // empty when the model failed before any version was found
  ModelState state;
  std::string reason;   // why UNAVAILABLE
};

// Triton's model control modes (--model-control-mode).
//   kNone:     LoadAll() loads the whole repository once; nothing changes later.
//   kPoll:     as kNone, then the loader thread rescans the repository every
//              poll_interval and loads added, reloads changed and unloads
//              removed models and versions.
//   kExplicit: LoadAll() loads only `startup_models`; later changes come from
//              Load()/Unload() (the repository API of the front ends).
enum class ModelControlMode { kNone, kPoll, kExplicit };

// --model-signature-policy: what a version whose model.sig is missing or
// does not verify gets (docs/signing.md). kOff: no check; kWarn: loads, the
// failure logged; kRequire: UNAVAILABLE with the failure as its reason.
enum class SignaturePolicy { kOff, kWarn, kRequire };

class SigningKeys;  // repository/SigningKeys.h

struct ModelSigningOptions {
  SignaturePolicy policy = SignaturePolicy::kOff;
  // --model-signing-public-key: PEM files of the keys a signature may be made with.
  std::vector<std::string> public_key_files;
  // --model-signing-certificate-chain: PEM files of the certificates a
  // certificate-based signature's chain must lead to.
  std::vector<std::string> certificate_chain_files;
  // The keys and certificates of those files, read once (LoadSigningKeys in
  // repository/ModelSigning.h; ModelRepository::Create reads them when
  // they are not yet): a changed key file takes effect at the next start.
  std::shared_ptr<const SigningKeys> keys;
};
const char* ModelControlModeName(ModelControlMode mode);  // "none", "poll", "explicit"

struct RepositoryOptions {
  std::string repository_path;
  // Cores the thread plan may use across all instances (default: hardware).
  int thread_budget = 0;
  // Models run on one process-wide ORT pool of thread_budget threads unless
  // their config asks for pools of their own (ThreadPlan.h); false: every
  // instance gets its own pools (--ort-thread-pool per-session).
  bool shared_thread_pool = true;
  ModelControlMode control_mode = ModelControlMode::kNone;
  // kPoll: time between two scans of the repository.
  std::chrono::milliseconds poll_interval = std::chrono::seconds(15);
  // kExplicit: the models LoadAll() loads ("*": all). Empty: none (as Triton).
  std::vector<std::string> startup_models;
  // Where TensorRT engine and timing caches live, shared by all instances of
  // a model and kept across restarts. Empty: <temp dir>/ortserve-model-cache.
  // When set, CPU sessions also keep their optimized graphs in
  // <dir>/optimized (runtime/OptimizedModelCache.h); empty: they do not.
  std::string model_cache_dir;
  // The response cache's capacity (--cache-config local,size=BYTES); 0: no
  // cache, and models that enable response_cache are served without one.
  uint64_t response_cache_bytes = 0;
  // Config auto-complete (--disable-auto-complete-config,
  // --backend-config=default-max-batch-size=N).
  AutoCompletePolicy auto_complete;
  // --op-library: custom-operator libraries registered for every model,
  // before its own model_operations.op_library_filename (runtime/OpLibraries.h).
  std::vector<std::string> op_libraries;
  // --backend-config=onnxruntime,session.<key>=V: ONNX Runtime session config
  // entries for every model; a model's parameter session.<key> replaces one.
  // (config/RuntimeConfig.h's SessionConfigEntries, spelt out: this header
  // is the front ends' view of the repository.)
  std::vector<std::pair<std::string, std::string>> session_config_entries;
  // Signature checks before a version loads (repository/ModelSigning.h).
  ModelSigningOptions signing;
  // --model-load-on-demand: models are listed but load on their first
  // request (ModelRepository::WhenLoaded), whatever the control mode; only
  // startup_models (kExplicit) load at startup.
  bool load_on_demand = false;
  // --model-load-wait-secs: the longest a request waits for such a load.
  std::chrono::milliseconds load_wait = std::chrono::seconds(60);
  // --model-memory-budget: the bytes loaded versions may hold together
  // (their resident cost, repository/MemoryBudget.h); a load that would
  // exceed it first unloads the least recently used idle models. 0: none.
  uint64_t memory_budget = 0;
};

// Why a model was loaded (ortserve_model_loads_total{reason}).
enum class LoadReason { kStartup, kPoll, kExplicit, kOnDemand };
inline constexpr size_t kLoadReasonCount = 4;
const char* LoadReasonName(LoadReason reason);  // "startup", "poll", "explicit", "on_demand"

// The resident cost of one loaded version (ortserve_model_memory_bytes).
struct VersionMemory {
  std::string model;
  std::string version;
  uint64_t bytes = 0;
};

struct ModelLoadStats {
  // Model loads (one per model, whatever its version count) by LoadReason.
  std::array<uint64_t, kLoadReasonCount> loads{};
  // Cold starts: from the first request for a model not loaded until its
  // on-demand load ended, in nanoseconds.
  Histogram::Snapshot cold_start;
  // Models unloaded to make room under --model-memory-budget.
  uint64_t evictions = 0;
  // --model-memory-budget in bytes (0: none), and what each loaded version costs.
  uint64_t memory_budget = 0;
  std::vector<VersionMemory> memory;
};

class ModelRepository {
 public:
  static Result<std::unique_ptr<ModelRepository>> Create(RepositoryOptions options);
  virtual ~ModelRepository() = default;

  // Loads every model in the repository. A model that fails is recorded as
  // UNAVAILABLE with its reason (and logged); the others load regardless.
  virtual void LoadAll() = 0;

  // A ready model version. `version` empty: the newest ready version allowed by
  // the version policy. kNotFound when there is no such model or version,
  // kUnavailable when it exists but is not ready (UnknownModelError,
  // ModelNotReadyError).
  virtual Result<std::shared_ptr<Model>> GetModel(const std::string& name,
                                                  const std::string& version) const = 0;

  // Every model and version known, with state and reason, sorted by name.
  virtual std::vector<ModelIndexEntry> Index() const = 0;
  // All ready model versions (for statistics).
  virtual std::vector<std::shared_ptr<Model>> ReadyModels() const = 0;
  // True when every model found in the repository is ready.
  virtual bool AllModelsReady() const = 0;
  // The response cache's state; nullopt when the server has none.
  virtual std::optional<ResponseCacheUsage> CacheUsage() const { return std::nullopt; }
  // The progressive canary of `name` (GET /v2/models/<m>/rollout): kNotFound
  // for a model not known, kInvalidArgument for one without a rollout.
  virtual Result<RolloutStatus> Rollout(const std::string& name) const {
    return InvalidArgument("model '" + name + "' has no rollout");
  }
  // Every configured rollout (for the metrics).
  virtual std::vector<RolloutStatus> Rollouts() const { return {}; }
  // Loads and cold starts so far (for the metrics); nullopt: not counted.
  virtual std::optional<ModelLoadStats> LoadStats() const { return std::nullopt; }

  // ---- on-demand loading (--model-load-on-demand) ---------------------------
  // True when a request for `name` must wait for WhenLoaded before its
  // lookup: on-demand loading is on, the repository has a directory `name`
  // and no version of it is READY.
  virtual bool NeedsLoad(const std::string& /*name*/) const { return false; }
  // The config of `name` (from its config.pbtxt, completed as a load would)
  // while NeedsLoad(name), and the versions a load would serve, newest last
  // -- for its metadata without loading it. Reads the model's files on the
  // caller's thread when they changed since the last call (the answer is
  // kept per model while its folder is unchanged: repository/ListedModels.h).
  // kNotFound when it does not need a load (GetModel answers for it),
  // kUnavailable when its config or files are invalid.
  struct ListedModel {
    inference::ModelConfig config;
    std::vector<std::string> versions;
  };
  virtual Result<ListedModel> Listed(const std::string& name) const;
  // Calls `done` exactly once, when a request for `name` may look it up:
  // OK once its on-demand load made it READY (concurrent callers share one
  // load), the load's error when it failed, kUnavailable when `deadline`
  // (capped by --model-load-wait-secs) passes first or the server stops.
  // Never blocks: `done` runs on the loader or a timer thread, or on the
  // caller's thread when there is nothing to wait for.
  virtual void WhenLoaded(const std::string& /*name*/, Clock::time_point /*deadline*/,
                          std::function<void(Status)> done) {
    done(Status::Ok());
  }

  // Stops the loader thread (queued loads/unloads answer kUnavailable), then
  // every scheduler after its in-flight requests finish -- or, at
  // `abandon_at`, answers what is still queued or running with kUnavailable
  // (Scheduler::Shutdown). Every accepted request is answered on return.
  virtual void Shutdown(Clock::time_point abandon_at) = 0;
  void Shutdown() { Shutdown(Clock::time_point::max()); }

  // ---- live model management ---------------------------------------------
  // Every load, unload and poll step runs on the repository's one loader
  // thread (created by Create()), one at a time, so they never race each other.
  //
  // Load(name) (re)reads <repo>/<name>: new versions are loaded; versions whose
  // config.pbtxt or model file changed (mtime or size) are loaded and warmed
  // beside the serving one and then swapped in atomically; versions no longer
  // selected are unloaded; unchanged ones keep serving. A version that fails
  // to load never replaces a working one: the old keeps serving and the
  // failure shows as the version's reason in Index() and in the log.
  // Unload(name) stops new requests at once and answers when the requests
  // already running on the model have finished.
  //
  // The *Async forms queue the work and return at once; `done` is called
  // exactly once, on the loader thread (on the caller's thread when refused at
  // once). Both answer kUnavailable unless the control mode is kExplicit (see
  // ModelControlDisabledMessage); kNotFound for a model with no directory. The blocking
  // forms wait for the loader thread: never call them from a thread that must
  // not block (I/O, completion queues) or from `done`.
  // (The defaults describe a repository without live management: kNone.)
  virtual ModelControlMode control_mode() const { return ModelControlMode::kNone; }
  virtual void LoadAsync(const std::string& name, std::function<void(Status)> done);
  virtual void UnloadAsync(const std::string& name, std::function<void(Status)> done);
  Status Load(const std::string& name);
  Status Unload(const std::string& name);
  // One poll step, whatever the mode: rescans the repository and syncs every
  // model with it (added, changed, removed). Blocks until it is done. The
  // loader thread calls it every poll_interval in kPoll mode.
  virtual void Poll() {}
};

// Why explicit load/unload is refused in `mode` (Triton's wording).
std::string ModelControlDisabledMessage(ModelControlMode mode);

// What GetModel answers when it finds no ready model, in Triton's words
// (triton-inference-server/core, ModelRepositoryManager::GetModel and
// ModelLifeCycle::GetModel), which Triton's clients and tests match by their
// beginning, "Request for unknown model":
//   no such model or version (kNotFound):
//     "Request for unknown model: 'm' is not found"
//     "Request for unknown model: 'm' version 3 is not found"
//   known but not ready (kUnavailable), with ortserve's reason after it:
//     "Request for unknown model: 'm' has no available versions: <reason>"
//     "Request for unknown model: 'm' version 3 is not at ready state: <reason>"
// `version` empty: the request named no version.
Status UnknownModelError(const std::string& name, const std::string& version);
Status ModelNotReadyError(const std::string& name, const std::string& version, const std::string& reason);

// Whether `version` of `name` is ready, for the ready endpoints (HTTP
// `GET /v2/models/m[/versions/v]/ready`, gRPC ModelReady). Any version of a
// model the repository knows answers true or false, as Triton's ModelIsReady
// (which Triton's QA, L0_server_status and L0_lifecycle, reads as
// `is_model_ready` == False): one not loaded, unloaded, outside the version
// policy or not on disk. An error (GetModel's kNotFound) only for a model name
// it does not know, or a version that is not a number.
Result<bool> IsModelVersionReady(const ModelRepository& repository, const std::string& name,
                                 const std::string& version);

// Triton's text (core tritonserver.cc, TRITONSERVER_ServerModelStatistics)
// for statistics of a version of a known model that is not ready, with
// GetModel's answer after it: kInvalidArgument
// "requested model version is not available for model 'm' (<why>)".
Status VersionNotAvailableError(const std::string& name, const Status& why);

}  // namespace ortserve

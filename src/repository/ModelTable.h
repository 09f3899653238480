#pragma once
// The repository's model states: every model and version known, its state
// (LOADING, READY, UNAVAILABLE, UNLOADING), why, and the ServedModel that
// serves it. Lookups for the request path; transitions for the loader,
// which alone writes (on its one thread).
//
// A transition never shuts a model down under the table's lock: models it
// replaces or retires are handed back, and the caller shuts them down
// (waiting for their in-flight requests) outside it.
//
// Thread-safe: lookups take the lock shared, transitions exclusively.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/Mutex.h"
#include "repository/MemoryBudget.h"
#include "repository/ModelPreparation.h"
#include "repository/ModelRepository.h"
#include "serving/ServedModel.h"
#include "serving/VersionRollout.h"
#include "serving/WeightedVersionPicker.h"

namespace ortserve {

class ModelTable {
 public:
  using Retired = std::vector<std::shared_ptr<ServedModel>>;

  // ---- lookups (any thread)
  // ModelRepository::GetModel's contract.
  Result<std::shared_ptr<Model>> Find(const std::string& name, const std::string& version) const
      ORTSERVE_EXCLUDES(mu_);
  // The newest READY version of `name`, ignoring canary weights (a fallback).
  std::shared_ptr<ServedModel> LatestReady(const std::string& name) const ORTSERVE_EXCLUDES(mu_);
  // Whether `name` has a READY version; if so and `touch_at` is given, the
  // newest counts as used then (ServedModel::Touch). For the on-demand check
  // every request makes: no reference to the model is taken, so it never
  // holds off an eviction (BeginEvict).
  bool HasReady(const std::string& name, std::optional<Clock::time_point> touch_at) const ORTSERVE_EXCLUDES(mu_);
  // Version `version` of `name` when READY (`version` <= 0: LatestReady).
  std::shared_ptr<ServedModel> ReadyVersion(const std::string& name, int64_t version) const ORTSERVE_EXCLUDES(mu_);
  // The progressive canary of `name` (serving/VersionRollout.h):
  // kNotFound for a model not known, kInvalidArgument for one without
  // rollout_* parameters.
  Result<RolloutStatus> Rollout(const std::string& name) const ORTSERVE_EXCLUDES(mu_);
  // Every model with a rollout configured (for the metrics).
  std::vector<RolloutStatus> Rollouts() const ORTSERVE_EXCLUDES(mu_);
  // A READY version whose model cannot serve now (an ensemble whose
  // composing model is not READY) is listed UNAVAILABLE, with the reason.
  std::vector<ModelIndexEntry> Index() const ORTSERVE_EXCLUDES(mu_);
  std::vector<std::shared_ptr<Model>> ReadyModels() const ORTSERVE_EXCLUDES(mu_);
  // Every model known is READY in every version (models unloaded on request
  // do not count).
  bool AllReady() const ORTSERVE_EXCLUDES(mu_);
  // The directory stamp of every model known at its last sync.
  std::map<std::string, std::string> DirStamps() const ORTSERVE_EXCLUDES(mu_);
  // The resident cost of every loaded version (ortserve_model_memory_bytes).
  std::vector<VersionMemory> Memory() const ORTSERVE_EXCLUDES(mu_);
  // Every model with a loaded version, as the eviction policy sees it
  // (MemoryBudget.h). `pinned_names`: --load-model's names. `composing`
  // gets, per model, the loaded ensembles whose steps name it.
  std::vector<ResidentModel> Residents(const std::vector<std::string>& pinned_names,
                                       std::map<std::string, std::vector<std::string>>* composing) const
      ORTSERVE_EXCLUDES(mu_);

  // ---- transitions (the loader thread)
  // Applies what preparing found, before any session is created: failures,
  // versions no longer selected (retired), LOADING for new versions. A
  // version or model that fails while an older load of it is READY keeps
  // that one. Leaves in `p.candidates` only the versions to (re)load.
  Retired Publish(PreparedModel& p) ORTSERVE_EXCLUDES(mu_);
  // The outcome of loading `c`: READY with the new model (the replaced one is
  // returned), or the failure -- kept as a reason while an older load serves
  // (then `kept` is set).
  // `bytes`: the loaded version's resident cost.
  std::shared_ptr<ServedModel> Install(const Candidate& c, Result<std::shared_ptr<ServedModel>> loaded, bool* kept,
                                       uint64_t bytes = 0) ORTSERVE_EXCLUDES(mu_);
  // A model named at startup (--load-model) that has no directory.
  void MarkMissing(const std::string& name, std::string reason) ORTSERVE_EXCLUDES(mu_);
  // Every version of `name` leaves service (UNLOADING); nullopt for a model
  // not known.
  std::optional<Retired> BeginUnload(const std::string& name) ORTSERVE_EXCLUDES(mu_);
  // After the retired models drained: forget the model (its directory is
  // gone) or record it as unloaded.
  void FinishUnload(const std::string& name, bool forget) ORTSERVE_EXCLUDES(mu_);
  // Eviction (memory budget): as BeginUnload, but only while no version is
  // in use -- no request inside it, no open sequence, and no one else
  // holding it (a request between its lookup and Infer) -- checked under
  // the lock that every lookup takes, so no request finds it afterwards.
  // nullopt when it is in use or not loaded.
  std::optional<Retired> BeginEvict(const std::string& name) ORTSERVE_EXCLUDES(mu_);
  // After the evicted versions drained: unloaded, its directory stamp kept
  // (a poll does not take it for a changed model).
  void FinishEvict(const std::string& name) ORTSERVE_EXCLUDES(mu_);
  // Shutdown: every model, READY versions marked UNLOADING.
  Retired TakeAllForShutdown() ORTSERVE_EXCLUDES(mu_);

 private:
  struct VersionRecord {
    ModelState state = ModelState::kLoading;
    std::string reason;
    std::shared_ptr<ServedModel> model;
    std::string stamp;  // config + model file the serving model was loaded from
    uint64_t bytes = 0;  // resident cost of `model` (MemoryBudget.h)
  };
  struct ModelRecord {
    std::string reason;  // failure before any version could be considered
    std::map<int64_t, VersionRecord> versions;
    // Canary split of unversioned requests; null: the newest ready version.
    std::shared_ptr<WeightedVersionPicker> canary;
    // Progressive canary between the two newest READY versions; null: none.
    // Kept across loads (its event counters), restarted by each.
    std::shared_ptr<VersionRollout> rollout;
    // shadow_version (0: none): answers only requests naming it, unless no
    // other version is READY.
    int64_t shadow_version = 0;
    bool unloaded = false;  // by request: not counted by AllReady
    std::string dir_stamp;  // DirectoryStamp at the last sync (poll)
  };

  // The rollout's stable and candidate: the two newest READY versions.
  // `hold` is set when a newer version is still loading (the running
  // rollout, if on these two, goes on; a new one waits for it).
  static std::optional<RolloutPair> RolloutPairOf(const ModelRecord& record, bool* hold);
  static std::optional<RolloutPair> ActiveRolloutPair(const ModelRecord& record);
  Result<std::shared_ptr<Model>> FindUnversioned(const std::string& name, const ModelRecord& record) const
      ORTSERVE_REQUIRES_SHARED(mu_);
  void PublishFailure(PreparedModel& p, ModelRecord& record, Retired* retired) ORTSERVE_REQUIRES(mu_);
  void PublishVersions(PreparedModel& p, ModelRecord& record, Retired* retired) ORTSERVE_REQUIRES(mu_);

  mutable SharedMutex mu_;
  std::map<std::string, ModelRecord> models_ ORTSERVE_GUARDED_BY(mu_);
};

// Why a version that failed to reload still serves its previous load.
std::string KeptReason(const std::string& why);

}  // namespace ortserve

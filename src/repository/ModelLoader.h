#pragma once
// The repository's loader: scanning the repository folder, preparing each
// model (ModelPreparation), loading and warming its versions (ModelBuilder)
// and publishing the outcome (ModelTable) -- on one thread of its own
// ("model-loader"), one job at a time, so that loads, unloads and polls
// never race each other.
//
// The thread plan: the startup load prepares every model first, so that the
// plan (ThreadPlan) knows the total instance count before any session is
// created; a model loaded later gets the plan it would have had at startup
// (the compute slots arbitrate between models).
//
// Thread safety: Run/Enqueue/Control from any thread; the jobs themselves
// run on the loader thread only.
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <set>
#include <functional>
#include <string>
#include <thread>

#include "core/Mutex.h"
#include "repository/ModelBuilder.h"
#include "repository/ModelRepository.h"
#include "repository/ModelTable.h"

namespace ortserve {

class ModelLoader {
 public:
  // `table` must outlive the loader. Starts the thread.
  ModelLoader(const RepositoryOptions* options, ModelTable* table, ModelBuildContext context);
  ~ModelLoader();  // Stop()

  // Runs `fn` on the loader thread and waits for it (inline when already
  // there). Not from a thread that must not block.
  void Run(std::function<void()> fn) ORTSERVE_EXCLUDES(mu_);
  // Queues an explicit load (`load`) or unload of `name`; `done` is called
  // exactly once, on the loader thread (on the caller's when refused at
  // once or when the loader has stopped).
  void Control(const std::string& name, bool load, std::function<void(Status)> done) ORTSERVE_EXCLUDES(mu_);
  // A preparation of `name` made already whose folder is unchanged since
  // (ListedModels::Reuse); null: none.
  using ReusePrepared = std::function<std::shared_ptr<const PreparedModel>(const std::string& name)>;
  // Queues the on-demand load of `name` (OnDemandLoads' StartLoad): `done`
  // answers OK when a version of it is READY afterwards (loaded meanwhile
  // included), else the load's error; kUnavailable when the loader stops.
  // `reuse`, asked on the loader thread when the load starts, spares it
  // preparing `name` again.
  void LoadOnDemand(const std::string& name, std::function<void(Status)> done, ReusePrepared reuse = {})
      ORTSERVE_EXCLUDES(mu_);
  // Model loads so far, by LoadReason.
  std::array<uint64_t, kLoadReasonCount> LoadCounts() const;
  // Models evicted so far (memory budget).
  uint64_t Evictions() const { return evictions_.load(std::memory_order_relaxed); }
  // PrepareModel with the repository's options (any thread: it only reads).
  PreparedModel Prepare(const std::string& name) const;
  // Stops the thread; queued jobs are cancelled (their `done` answers
  // kUnavailable). Idempotent.
  void Stop() ORTSERVE_EXCLUDES(mu_);

  // ---- jobs (loader thread only)
  // The startup load: the whole repository, or --load-model's list.
  void LoadAll();
  // Rescans the repository and syncs every model with it.
  void PollNow();

 private:
  // A queued job; `cancelled` when the loader stops first.
  using Task = std::function<void(bool cancelled)>;
  void Enqueue(Task task) ORTSERVE_EXCLUDES(mu_);
  void Loop() ORTSERVE_EXCLUDES(mu_);

  std::vector<std::string> StartupModels();
  // Loads `name`; an ensemble's composing models that are not READY are
  // loaded first (as Triton loads an ensemble's dependencies with it), and
  // on demand the model its reference_model names.
  // `loading`: the models this load has started (null: only `name`).
  // `prepared`: `name`'s preparation, made already; null: prepared here.
  Status LoadNow(const std::string& name, std::set<std::string>* loading, LoadReason reason,
                 std::shared_ptr<const PreparedModel> prepared = nullptr);
  void LoadComposingModels(const PreparedModel& p, std::set<std::string>* loading, LoadReason reason);
  // The startup load: the composing models of the ensembles in `prepared`
  // that it does not hold yet (explicit mode names only some models).
  void AddComposingModels(std::vector<PreparedModel>& prepared) const;
  // Stops new requests to every version of `name`, waits for the running
  // ones, then drops the model (`forget`: its directory is gone) or marks
  // it unloaded.
  Status UnloadNow(const std::string& name, bool forget);
  // Loads and warms each candidate of the published `p` beside whatever
  // serves now, then swaps it in. OK when every candidate and version of
  // `p` is READY; otherwise the failures, named by version.
  // Under --model-memory-budget, each candidate is first made room for
  // (MakeRoom); when it cannot be, none loads and the budget's kUnavailable
  // is returned. `loading`: the models of this load (not evicted for it).
  Status LoadCandidates(const PreparedModel& p, LoadReason reason, const std::set<std::string>* loading = nullptr);
  // Evicts least recently used idle models until `p`'s candidates fit in the
  // budget (MemoryBudget.h's PlanEviction); a loaded ensemble composing an
  // evicted model is evicted with it (it could not serve without it).
  // `costs`: each candidate's ResidentCost, in order.
  Status MakeRoom(const PreparedModel& p, const std::vector<uint64_t>& costs, const std::set<std::string>* loading);
  // Unloads `name` to make room for `for_model`; false when it turned out
  // to be in use (ModelTable::BeginEvict).
  bool EvictNow(const std::string& name, const std::string& for_model);
  // The estimated resident cost of loading `c` (MemoryBudget.h).
  static uint64_t ResidentCost(const Candidate& c);
  ThreadPlanEntry RuntimePlan(const Candidate& c) const;

  const RepositoryOptions* const options_;
  ModelTable* const table_;
  const ModelBuildContext context_;
  // Models that need others (ensembles, reference_model "model:<name>")
  // whose last load failed: a poll that changes the repository retries
  // them. Loader thread only.
  std::set<std::string> dependents_failed_;
  std::array<std::atomic<uint64_t>, kLoadReasonCount> loads_{};
  std::atomic<uint64_t> evictions_{0};

  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_ ORTSERVE_GUARDED_BY(mu_);
  bool stopping_ ORTSERVE_GUARDED_BY(mu_) = false;
  bool initial_load_done_ ORTSERVE_GUARDED_BY(mu_) = false;  // polling starts after LoadAll
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace ortserve

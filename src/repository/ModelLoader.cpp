#include "repository/ModelLoader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "config/ConfigParse.h"
#include "config/EnsembleGraph.h"
#include "core/Text.h"
#include "core/ThreadName.h"
#include "repository/ModelDirectory.h"
#include "repository/PreparedOrder.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;

// Plans the threads of every candidate at once and logs the plan.
void PlanThreads(const RepositoryOptions& options, std::vector<PreparedModel>& prepared) {
  std::vector<ThreadPlanRequest> requests;
  for (const auto& p : prepared) {
    for (const auto& c : p.candidates) {
      if (!IsEnsemble(c.config)) requests.push_back(PlanRequest(c));
    }
  }
  const ThreadPlan plan = ThreadPlan::Compute(options.thread_budget, requests, options.shared_thread_pool);
  for (const auto& line : plan.Describe()) spdlog::info("thread plan: {}", line);
  if (plan.oversubscribed) {
    const bool any_explicit = std::any_of(plan.entries.begin(), plan.entries.end(),
                                          [](const ThreadPlanEntry& e) { return e.explicit_intra; });
    spdlog::info("thread plan: {} threads could compute at once for {} cores{}; executions wait for free "
                 "compute slots rather than contend",
                 plan.total_threads, plan.budget,
                 any_explicit ? " because of configured intra_op_thread_count" : " (more instances than cores)");
  }
  size_t i = 0;
  for (auto& p : prepared) {
    for (auto& c : p.candidates) {
      if (!IsEnsemble(c.config)) c.plan = plan.entries[i++];
    }
  }
}

constexpr int kEvictRetries = 50;
constexpr auto kEvictRetryPause = std::chrono::milliseconds(2);

void ShutDown(const ModelTable::Retired& models) {
  for (const auto& m : models) m->Shutdown();  // waits for their in-flight requests
}

}  // namespace

ModelLoader::ModelLoader(const RepositoryOptions* options, ModelTable* table, ModelBuildContext context)
    : options_(options), table_(table), context_(std::move(context)), thread_([this] { Loop(); }) {}

ModelLoader::~ModelLoader() { Stop(); }

void ModelLoader::Enqueue(Task task) {
  {
    MutexLock lock(mu_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      cv_.notify_all();
      return;
    }
  }
  task(true);
}

void ModelLoader::Run(std::function<void()> fn) {
  if (std::this_thread::get_id() == thread_.get_id()) return fn();
  std::promise<void> finished;
  auto future = finished.get_future();
  Enqueue([&](bool cancelled) {
    if (!cancelled) fn();
    finished.set_value();
  });
  future.wait();
}

void ModelLoader::Loop() {
  SetCurrentThreadName("model-loader");
  const bool poll = options_->control_mode == ModelControlMode::kPoll;
  const auto interval = std::max(options_->poll_interval, std::chrono::milliseconds(1));
  auto next_poll = std::chrono::steady_clock::now() + interval;
  MutexLock lock(mu_);
  while (!stopping_) {
    if (!tasks_.empty()) {
      Task task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.Unlock();
      task(false);
      lock.Lock();
      continue;
    }
    if (!poll || !initial_load_done_) {
      lock.Wait(cv_);
      continue;
    }
    if (std::chrono::steady_clock::now() >= next_poll) {
      lock.Unlock();
      PollNow();
      lock.Lock();
      next_poll = std::chrono::steady_clock::now() + interval;
      continue;
    }
    cv_.wait_until(lock.native(), next_poll);
  }
  std::deque<Task> left = std::move(tasks_);
  lock.Unlock();
  for (Task& task : left) task(true);
}

void ModelLoader::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

void ModelLoader::Control(const std::string& name, bool load, std::function<void(Status)> done) {
  if (options_->control_mode != ModelControlMode::kExplicit) {
    return done(Unavailable(ModelControlDisabledMessage(options_->control_mode)));
  }
  if (!IsModelName(name)) {
    return done(InvalidArgument("'" + name + "' is not a model name (a directory of the model repository)"));
  }
  Enqueue([this, name, load, done = std::move(done)](bool cancelled) {
    if (cancelled) {
      return done(Unavailable("server is shutting down; model '" + name + "' was not " +
                              (load ? "loaded" : "unloaded")));
    }
    done(load ? LoadNow(name, nullptr, LoadReason::kExplicit) : UnloadNow(name, /*forget=*/false));
  });
}

void ModelLoader::LoadOnDemand(const std::string& name, std::function<void(Status)> done, ReusePrepared reuse) {
  Enqueue([this, name, done = std::move(done), reuse = std::move(reuse)](bool cancelled) {
    if (cancelled) return done(Unavailable("server is shutting down; model '" + name + "' was not loaded"));
    if (table_->LatestReady(name)) return done(Status::Ok());  // loaded meanwhile
    spdlog::info("model '{}': loading on its first request", name);
    const Status loaded = LoadNow(name, nullptr, LoadReason::kOnDemand, reuse ? reuse(name) : nullptr);
    if (table_->LatestReady(name)) return done(Status::Ok());
    done(loaded.ok() ? Unavailable("model '" + name + "' has no version to load") : loaded);
  });
}

std::array<uint64_t, kLoadReasonCount> ModelLoader::LoadCounts() const {
  std::array<uint64_t, kLoadReasonCount> counts{};
  for (size_t i = 0; i < kLoadReasonCount; ++i) counts[i] = loads_[i].load(std::memory_order_relaxed);
  return counts;
}

std::vector<std::string> ModelLoader::StartupModels() {
  const auto& wanted = options_->startup_models;
  if (options_->load_on_demand && options_->control_mode != ModelControlMode::kExplicit) {
    spdlog::info("model load on demand: no model loads at startup");
    return {};
  }
  std::vector<std::string> names = ListModelDirs(options_->repository_path);
  if (options_->control_mode != ModelControlMode::kExplicit ||
      std::find(wanted.begin(), wanted.end(), "*") != wanted.end()) {
    return names;
  }
  std::vector<std::string> chosen;
  for (const auto& w : wanted) {
    if (std::find(names.begin(), names.end(), w) != names.end()) {
      chosen.push_back(w);
      continue;
    }
    spdlog::error("--load-model '{}': no such model directory in {}", w, options_->repository_path);
    table_->MarkMissing(w, "--load-model names it but the model repository has no directory '" + w + "'");
  }
  spdlog::info("model control mode explicit: loading {} model(s) at startup", chosen.size());
  return chosen;
}

void ModelLoader::LoadAll() {
  spdlog::info("model control mode {}{}", ModelControlModeName(options_->control_mode),
               options_->control_mode == ModelControlMode::kPoll
                   ? " (repository polled every " + std::to_string(options_->poll_interval.count()) + " ms)"
                   : "");
  // Every config is prepared first: the thread plan needs the total
  // instance count before any session is created.
  std::vector<PreparedModel> prepared;
  for (const auto& name : StartupModels()) prepared.push_back(Prepare(name));
  AddComposingModels(prepared);
  PlanThreads(*options_, prepared);
  FallbacksFirst(prepared);
  FailEnsembleCycles(prepared);
  FailReferenceCycles(prepared);
  DependentsLast(prepared);
  // Every model's LOADING/UNAVAILABLE state is published before the first load.
  for (auto& p : prepared) ShutDown(table_->Publish(p));
  for (auto& p : prepared) (void)LoadCandidates(p, LoadReason::kStartup);
  MutexLock lock(mu_);
  initial_load_done_ = true;
}

void ModelLoader::AddComposingModels(std::vector<PreparedModel>& prepared) const {
  AddComposingModelsOf(prepared, options_->repository_path, [this](const std::string& name) { return Prepare(name); });
}

Status ModelLoader::LoadNow(const std::string& name, std::set<std::string>* loading, LoadReason reason,
                            std::shared_ptr<const PreparedModel> prepared) {
  std::set<std::string> first_call;
  if (!loading) loading = &first_call;
  loading->insert(name);
  std::error_code ec;
  if (!fs::is_directory(fs::path(options_->repository_path) / name, ec)) {
    return NotFound("failed to load '" + name + "': no model directory '" + name + "' in the model repository " +
                    options_->repository_path);
  }
  PreparedModel p = prepared ? *prepared : Prepare(name);
  LoadComposingModels(p, loading, reason);
  ShutDown(table_->Publish(p));
  return LoadCandidates(p, reason, loading);
}

void ModelLoader::LoadComposingModels(const PreparedModel& p, std::set<std::string>* loading, LoadReason reason) {
  // On demand, the model its reference_model names loads first too; an
  // explicit load leaves that to the operator (docs/model-config.md).
  const std::set<std::string> needed = reason == LoadReason::kOnDemand ? Dependencies(p) : ComposingModels(p);
  for (const std::string& step : needed) {
    if (table_->LatestReady(step) || !loading->insert(step).second) continue;
    const char* role = ComposingModels(p).count(step) ? "composing" : "reference";
    spdlog::info("model '{}': loading its {} model '{}'", p.name, role, step);
    if (Status loaded = LoadNow(step, loading, reason); !loaded.ok()) {
      spdlog::error("model '{}': {} model '{}' failed to load: {}", p.name, role, step, loaded.message());
    }
  }
}

Status ModelLoader::UnloadNow(const std::string& name, bool forget) {
  std::optional<ModelTable::Retired> retired = table_->BeginUnload(name);
  if (!retired) {
    std::error_code ec;
    if (fs::is_directory(fs::path(options_->repository_path) / name, ec)) return Status::Ok();
    return NotFound("failed to unload '" + name + "': unknown model");
  }
  spdlog::info("model '{}': unloading {} version(s){}", name, retired->size(),
               forget ? " (removed from the model repository)" : "");
  ShutDown(*retired);
  table_->FinishUnload(name, forget);
  dependents_failed_.erase(name);
  spdlog::info("model '{}' unloaded", name);
  return Status::Ok();
}

void ModelLoader::PollNow() {
  const std::vector<std::string> names = ListModelDirs(options_->repository_path);
  const std::map<std::string, std::string> stamps = table_->DirStamps();
  for (const auto& [name, stamp] : stamps) {
    if (!std::binary_search(names.begin(), names.end(), name)) (void)UnloadNow(name, /*forget=*/true);
  }
  std::vector<PreparedModel> changed;
  for (const auto& name : names) {
    const fs::path dir = fs::path(options_->repository_path) / name;
    auto known = stamps.find(name);
    if (known != stamps.end() && known->second == DirectoryStamp(dir)) continue;
    // On demand, polling keeps the loaded models in sync; the others load
    // on their first request.
    if (options_->load_on_demand && (known == stamps.end() || known->second.empty())) continue;
    spdlog::info("poll: model '{}' {}", name, known == stamps.end() ? "added" : "changed");
    changed.push_back(Prepare(name));
  }
  // An ensemble (or a model with reference_model "model:<name>") that failed
  // to load may now find the models it lacked.
  if (!changed.empty()) {
    for (const std::string& name : std::set<std::string>(dependents_failed_)) {
      const bool already = std::any_of(changed.begin(), changed.end(), [&](const auto& p) { return p.name == name; });
      if (already || !std::binary_search(names.begin(), names.end(), name)) continue;
      spdlog::info("poll: model '{}' retried after its repository changed (it needs other models)", name);
      changed.push_back(Prepare(name));
    }
  }
  FailReferenceCycles(changed);
  DependentsLast(changed);
  for (auto& p : changed) {
    ShutDown(table_->Publish(p));
    (void)LoadCandidates(p, LoadReason::kPoll);
  }
}

PreparedModel ModelLoader::Prepare(const std::string& name) const {
  return PrepareModel(options_->repository_path, name, options_->auto_complete, options_->op_libraries,
                      options_->session_config_entries, options_->signing);
}

ThreadPlanEntry ModelLoader::RuntimePlan(const Candidate& c) const {
  ThreadPlan plan = ThreadPlan::Compute(options_->thread_budget, {PlanRequest(c)}, options_->shared_thread_pool);
  spdlog::info("thread plan: {} (loaded at run time)", plan.Describe().front());
  return plan.entries.front();
}

uint64_t ModelLoader::ResidentCost(const Candidate& c) {
  const fs::path version_dir = c.model_path.empty() ? c.model_dir / std::to_string(c.version)
                                                    : fs::path(c.model_path).parent_path();
  return EstimateResidentBytes(version_dir, IsEnsemble(c.config));
}

Status ModelLoader::MakeRoom(const PreparedModel& p, const std::vector<uint64_t>& costs,
                             const std::set<std::string>* loading) {
  if (options_->memory_budget == 0 || p.candidates.empty()) return Status::Ok();
  std::map<int64_t, uint64_t> replaced;  // versions of `p` the new loads replace
  for (const VersionMemory& m : table_->Memory()) {
    if (m.model == p.name) replaced[std::stoll(m.version)] = m.bytes;
  }
  uint64_t need = 0;
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    const int64_t version = p.candidates[i].version;
    const uint64_t cost = costs[i], old = replaced.count(version) ? replaced[version] : 0;
    need += cost > old ? cost - old : 0;
  }
  std::vector<std::string> pinned = options_->startup_models;  // '*' names no model
  // A victim may turn out to be in use by the time it is unloaded (a request
  // between its lookup and Infer, or a metrics scrape, holds it a moment):
  // plan again, a little later, for up to about kEvictRetries x kEvictRetryPause.
  for (int attempt = 0; attempt < kEvictRetries; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kEvictRetryPause);
    std::map<std::string, std::vector<std::string>> composing;
    std::vector<ResidentModel> resident = table_->Residents(pinned, &composing);
    // Held for this load: its models, and the models their ensembles compose.
    auto part_of_load = [&](const std::string& name) { return name == p.name || (loading && loading->count(name)); };
    for (ResidentModel& r : resident) {
      const auto& ensembles = composing[r.name];
      r.loading = part_of_load(r.name) || std::any_of(ensembles.begin(), ensembles.end(), part_of_load);
    }
    Result<std::vector<std::string>> victims = PlanEviction(options_->memory_budget, p.name, need, resident);
    if (!victims.ok()) {
      spdlog::warn("model '{}' not loaded: {}", p.name, victims.status().message());
      return victims.status();
    }
    if (victims->empty()) return Status::Ok();
    bool all = true;
    for (const std::string& victim : *victims) {
      bool ensembles_gone = true;  // an ensemble in use keeps its composing models
      for (const std::string& ensemble : composing[victim]) {
        ensembles_gone = EvictNow(ensemble, p.name) && ensembles_gone;
      }
      all = ensembles_gone && EvictNow(victim, p.name) && all;
    }
    if (all) return Status::Ok();
  }
  return Unavailable("model memory budget " + FormatBytes(options_->memory_budget) + " exhausted: loading '" +
                     p.name + "' needs " + FormatBytes(need) + " and the models it would evict stayed in use");
}

bool ModelLoader::EvictNow(const std::string& name, const std::string& for_model) {
  uint64_t bytes = 0;
  bool loaded = false;
  for (const VersionMemory& m : table_->Memory()) {
    if (m.model != name) continue;
    loaded = true;
    bytes += m.bytes;
  }
  if (!loaded) return true;  // gone already (an ensemble evicted with another victim)
  std::shared_ptr<ServedModel> latest = table_->LatestReady(name);
  const double idle_s =
      latest ? std::chrono::duration<double>(Clock::now().time_since_epoch() -
                                             Clock::duration(latest->LastUsedNs())).count()
             : 0.0;
  latest.reset();  // BeginEvict wants the table's reference alone
  std::optional<ModelTable::Retired> retired = table_->BeginEvict(name);
  if (!retired) return false;
  spdlog::info("model '{}' evicted to make room for '{}' (model memory budget {}): {} resident, idle {:.1f} s", name,
               for_model, FormatBytes(options_->memory_budget), FormatBytes(bytes), idle_s);
  ShutDown(*retired);
  table_->FinishEvict(name);
  dependents_failed_.erase(name);
  evictions_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Status ModelLoader::LoadCandidates(const PreparedModel& p, LoadReason reason, const std::set<std::string>* loading) {
  // Walks each candidate's files once: for the budget and for the table.
  std::vector<uint64_t> costs;
  for (const Candidate& c : p.candidates) costs.push_back(ResidentCost(c));
  if (Status room = MakeRoom(p, costs, loading); !room.ok()) {
    for (const Candidate& c : p.candidates) {
      bool kept = false;
      (void)table_->Install(c, room, &kept);
    }
    return room;
  }
  if (!p.candidates.empty()) loads_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  std::vector<std::string> failures;
  if (!p.failure.empty()) failures.push_back(p.failure);
  for (const auto& [v, why] : p.version_failures) failures.push_back("version " + std::to_string(v) + ": " + why);
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    const Candidate& c = p.candidates[i];
    const ThreadPlanEntry plan = c.plan ? *c.plan : IsEnsemble(c.config) ? ThreadPlanEntry{} : RuntimePlan(c);
    auto loaded = BuildModel(c, plan, context_);
    const Status status = loaded.status();
    bool kept = false;
    std::shared_ptr<ServedModel> old = table_->Install(c, std::move(loaded), &kept, costs[i]);
    if (!status.ok()) {
      spdlog::error("model '{}' version {} {}: {}", c.name, c.version,
                    kept ? "failed to reload; the previous load keeps serving" : "is UNAVAILABLE", status.message());
      failures.push_back("version " + std::to_string(c.version) + ": " + status.message());
    } else if (old) {
      spdlog::info("model '{}' version {} reloaded; the previous load drains and unloads", c.name, c.version);
      old->Shutdown();  // waits for its in-flight requests
    }
  }
  if (!Dependencies(p).empty() && !failures.empty()) {
    dependents_failed_.insert(p.name);
  } else {
    dependents_failed_.erase(p.name);
  }
  if (failures.empty()) return Status::Ok();
  return InvalidArgument("failed to load '" + p.name + "': " + Join(failures));
}

}  // namespace ortserve

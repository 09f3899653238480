#include "repository/ModelTable.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "config/EnsembleGraph.h"

namespace ortserve {

std::string KeptReason(const std::string& why) {
  return "reload failed, the previous load keeps serving: " + why;
}

Result<std::shared_ptr<Model>> ModelTable::Find(const std::string& name, const std::string& version) const {
  ReaderLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return UnknownModelError(name, "");
  const ModelRecord& record = it->second;
  if (version.empty()) return FindUnversioned(name, record);
  for (const auto& [number, v] : record.versions) {
    if (std::to_string(number) != version) continue;
    if (v.state == ModelState::kReady) return std::shared_ptr<Model>(v.model);
    return ModelNotReadyError(name, version, v.reason);
  }
  return UnknownModelError(name, version);
}

std::optional<RolloutPair> ModelTable::RolloutPairOf(const ModelRecord& record, bool* hold) {
  *hold = false;
  const VersionRecord* found[2] = {nullptr, nullptr};
  int64_t numbers[2] = {0, 0};
  int n = 0;
  for (auto v = record.versions.rbegin(); v != record.versions.rend() && n < 2; ++v) {
    if (v->first == record.shadow_version) continue;  // takes no part in the rollout
    if (v->second.state == ModelState::kLoading && n == 0) *hold = true;
    if (v->second.state != ModelState::kReady || !v->second.model) continue;
    found[n] = &v->second;
    numbers[n++] = v->first;
  }
  if (n < 2) return std::nullopt;
  return RolloutPair{numbers[1], &found[1]->model->stats(), found[1]->model.get(),
                     numbers[0], &found[0]->model->stats(), found[0]->model.get()};
}

std::optional<RolloutPair> ModelTable::ActiveRolloutPair(const ModelRecord& record) {
  if (!record.rollout) return std::nullopt;
  bool hold = false;
  auto pair = RolloutPairOf(record, &hold);
  if (!pair || (hold && !record.rollout->Tracks(*pair))) return std::nullopt;
  return pair;
}

// With a rollout on two READY versions, the candidate takes its share; the
// rest goes by version_weights among the other versions when the config sets
// them, else to the stable version. Otherwise: version_weights, else the
// newest READY version. The shadow version answers none of them while any
// other version is READY.
Result<std::shared_ptr<Model>> ModelTable::FindUnversioned(const std::string& name, const ModelRecord& record) const {
  const std::optional<RolloutPair> pair = ActiveRolloutPair(record);
  if (pair && record.rollout->RouteToCandidate(Clock::now(), *pair)) {
    return std::shared_ptr<Model>(record.versions.at(pair->candidate_version).model);
  }
  if (record.canary) {
    auto picked = record.canary->Pick([&](int64_t v) {
      auto found = record.versions.find(v);
      return found != record.versions.end() && found->second.state == ModelState::kReady &&
             !(pair && v == pair->candidate_version) && v != record.shadow_version;
    });
    if (picked) return std::shared_ptr<Model>(record.versions.at(*picked).model);
  }
  if (pair) return std::shared_ptr<Model>(record.versions.at(pair->stable_version).model);
  for (auto v = record.versions.rbegin(); v != record.versions.rend(); ++v) {
    if (v->second.state == ModelState::kReady && v->first != record.shadow_version) {
      return std::shared_ptr<Model>(v->second.model);
    }
  }
  if (auto shadow = record.versions.find(record.shadow_version);
      shadow != record.versions.end() && shadow->second.state == ModelState::kReady) {
    return std::shared_ptr<Model>(shadow->second.model);
  }
  std::string reason = record.reason;
  for (auto v = record.versions.rbegin(); reason.empty() && v != record.versions.rend(); ++v) {
    reason = v->second.reason;
  }
  return ModelNotReadyError(name, "", reason);
}

Result<RolloutStatus> ModelTable::Rollout(const std::string& name) const {
  ReaderLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return UnknownModelError(name, "");
  if (!it->second.rollout) {
    if (!it->second.reason.empty()) {
      return InvalidArgument("model '" + name + "' has no rollout: it is UNAVAILABLE: " + it->second.reason);
    }
    return InvalidArgument("model '" + name + "' has no rollout: its config sets no rollout_* parameters");
  }
  return it->second.rollout->Status(Clock::now(), ActiveRolloutPair(it->second));
}

std::vector<RolloutStatus> ModelTable::Rollouts() const {
  ReaderLock lock(mu_);
  std::vector<RolloutStatus> out;
  for (const auto& [name, record] : models_) {
    if (record.rollout) out.push_back(record.rollout->Status(Clock::now(), ActiveRolloutPair(record)));
  }
  return out;
}

std::shared_ptr<ServedModel> ModelTable::LatestReady(const std::string& name) const {
  ReaderLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return nullptr;
  for (auto v = it->second.versions.rbegin(); v != it->second.versions.rend(); ++v) {
    if (v->second.state == ModelState::kReady && v->second.model) return v->second.model;
  }
  return nullptr;
}

bool ModelTable::HasReady(const std::string& name, std::optional<Clock::time_point> touch_at) const {
  ReaderLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return false;
  for (auto v = it->second.versions.rbegin(); v != it->second.versions.rend(); ++v) {
    if (v->second.state != ModelState::kReady || !v->second.model) continue;
    if (touch_at) v->second.model->Touch(*touch_at);
    return true;
  }
  return false;
}

std::shared_ptr<ServedModel> ModelTable::ReadyVersion(const std::string& name, int64_t version) const {
  if (version <= 0) return LatestReady(name);
  ReaderLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return nullptr;
  auto v = it->second.versions.find(version);
  if (v == it->second.versions.end() || v->second.state != ModelState::kReady) return nullptr;
  return v->second.model;
}

std::vector<ModelIndexEntry> ModelTable::Index() const {
  std::vector<ModelIndexEntry> out;
  std::vector<std::shared_ptr<ServedModel>> serving;  // parallel to out: READY entries
  {
    ReaderLock lock(mu_);
    for (const auto& [name, record] : models_) {
      if (record.versions.empty()) {
        out.push_back({name, "", ModelState::kUnavailable, record.reason});
        serving.push_back(nullptr);
      }
      for (const auto& [number, v] : record.versions) {
        out.push_back({name, std::to_string(number), v.state, v.reason});
        serving.push_back(v.state == ModelState::kReady ? v.model : nullptr);
      }
    }
  }
  // Outside the lock: an ensemble's readiness looks its composing models up here.
  for (size_t i = 0; i < out.size(); ++i) {
    if (!serving[i]) continue;
    if (Status readiness = serving[i]->Readiness(); !readiness.ok()) {
      out[i].state = ModelState::kUnavailable;
      out[i].reason = readiness.message();
    }
  }
  return out;
}

std::vector<std::shared_ptr<Model>> ModelTable::ReadyModels() const {
  ReaderLock lock(mu_);
  std::vector<std::shared_ptr<Model>> out;
  for (const auto& [name, record] : models_) {
    for (const auto& [number, v] : record.versions) {
      if (v.state == ModelState::kReady) out.push_back(v.model);
    }
  }
  return out;
}

bool ModelTable::AllReady() const {
  std::vector<std::shared_ptr<ServedModel>> serving;
  {
    ReaderLock lock(mu_);
    for (const auto& [name, record] : models_) {
      if (record.unloaded) continue;
      if (record.versions.empty()) return false;
      for (const auto& [number, v] : record.versions) {
        if (v.state != ModelState::kReady) return false;
        serving.push_back(v.model);
      }
    }
  }
  return std::all_of(serving.begin(), serving.end(), [](const auto& m) { return m && m->ready(); });
}

std::map<std::string, std::string> ModelTable::DirStamps() const {
  ReaderLock lock(mu_);
  std::map<std::string, std::string> stamps;
  for (const auto& [name, record] : models_) stamps[name] = record.dir_stamp;
  return stamps;
}

ModelTable::Retired ModelTable::Publish(PreparedModel& p) {
  Retired retired;
  WriterLock lock(mu_);
  ModelRecord& record = models_[p.name];
  if (record.unloaded) record.reason.clear();  // "unloaded", or evicted by the memory budget
  record.unloaded = false;
  record.dir_stamp = p.dir_stamp;
  if (!p.failure.empty()) {
    PublishFailure(p, record, &retired);
  } else {
    PublishVersions(p, record, &retired);
  }
  return retired;
}

void ModelTable::PublishFailure(PreparedModel& p, ModelRecord& record, Retired* retired) {
  bool serving = false;
  for (const auto& [number, v] : record.versions) serving |= v.state == ModelState::kReady;
  spdlog::error("model '{}' {}: {}", p.name,
                serving ? "failed to reload; its previous load keeps serving" : "is UNAVAILABLE", p.failure);
  if (serving) {
    for (auto& [number, v] : record.versions) {
      if (v.state == ModelState::kReady) v.reason = KeptReason(p.failure);
    }
  } else {
    for (auto& [number, v] : record.versions) {
      if (v.model) retired->push_back(v.model);
    }
    record.versions.clear();
    record.reason = p.failure;
    record.canary.reset();
    record.rollout.reset();
    record.shadow_version = 0;
  }
  p.candidates.clear();
}

void ModelTable::PublishVersions(PreparedModel& p, ModelRecord& record, Retired* retired) {
  record.reason.clear();
  record.canary = p.canary;
  record.shadow_version = p.shadow_version;
  if (!p.rollout) {
    record.rollout.reset();
  } else if (record.rollout) {
    record.rollout->Restart(*p.rollout);
  } else {
    record.rollout = std::make_shared<VersionRollout>(p.name, *p.rollout);
  }
  std::set<int64_t> wanted;
  for (const auto& c : p.candidates) wanted.insert(c.version);
  for (const auto& [v, why] : p.version_failures) wanted.insert(v);
  for (auto it = record.versions.begin(); it != record.versions.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    spdlog::info("model '{}' version {} is no longer selected; unloading it", p.name, it->first);
    if (it->second.model) retired->push_back(it->second.model);
    it = record.versions.erase(it);
  }
  for (const auto& [version, why] : p.version_failures) {
    VersionRecord& v = record.versions[version];
    const bool serving = v.state == ModelState::kReady;
    spdlog::error("model '{}' version {} {}: {}", p.name, version,
                  serving ? "failed to reload; the previous load keeps serving" : "is UNAVAILABLE", why);
    if (serving) {
      v.reason = KeptReason(why);
    } else {
      if (v.model) retired->push_back(v.model);
      v = VersionRecord{ModelState::kUnavailable, why, nullptr, ""};
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

std::shared_ptr<ServedModel> ModelTable::Install(const Candidate& c, Result<std::shared_ptr<ServedModel>> loaded,
                                                 bool* kept, uint64_t bytes) {
  *kept = false;
  WriterLock lock(mu_);
  VersionRecord& v = models_[c.name].versions[c.version];
  if (loaded.ok()) {
    std::shared_ptr<ServedModel> old = std::move(v.model);
    v = VersionRecord{ModelState::kReady, "", std::move(loaded).value(), c.stamp, bytes};
    return old;
  }
  if (v.state == ModelState::kReady) {
    *kept = true;
    v.reason = KeptReason(loaded.status().message());
  } else {
    v.state = ModelState::kUnavailable;
    v.reason = loaded.status().message();
  }
  return nullptr;
}

void ModelTable::MarkMissing(const std::string& name, std::string reason) {
  WriterLock lock(mu_);
  models_[name].reason = std::move(reason);
}

std::optional<ModelTable::Retired> ModelTable::BeginUnload(const std::string& name) {
  WriterLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return std::nullopt;
  Retired retired;
  for (auto& [number, v] : it->second.versions) {
    if (v.model) retired.push_back(v.model);
    v.state = ModelState::kUnloading;
    v.reason.clear();
  }
  it->second.canary.reset();
  it->second.rollout.reset();
  return retired;
}

void ModelTable::FinishUnload(const std::string& name, bool forget) {
  WriterLock lock(mu_);
  if (forget) {
    models_.erase(name);
    return;
  }
  ModelRecord& record = models_[name];
  record = ModelRecord{};
  record.reason = "unloaded";
  record.unloaded = true;
}

std::vector<VersionMemory> ModelTable::Memory() const {
  ReaderLock lock(mu_);
  std::vector<VersionMemory> out;
  for (const auto& [name, record] : models_) {
    for (const auto& [number, v] : record.versions) {
      if (v.model) out.push_back({name, std::to_string(number), v.bytes});
    }
  }
  return out;
}

namespace {

bool PinnedByConfig(const inference::ModelConfig& config) {
  auto it = config.parameters().find("pinned");
  return it != config.parameters().end() && it->second.string_value() == "true";
}

}  // namespace

std::vector<ResidentModel> ModelTable::Residents(const std::vector<std::string>& pinned_names,
                                                 std::map<std::string, std::vector<std::string>>* composing) const {
  std::map<std::string, ResidentModel> by_name;
  std::map<std::string, std::string> held_by;  // composing model -> an ensemble in use
  ReaderLock lock(mu_);
  for (const auto& [name, record] : models_) {
    for (const auto& [number, v] : record.versions) {
      if (!v.model) continue;
      ResidentModel& r = by_name[name];
      r.name = name;
      r.bytes += v.bytes;
      r.last_used_ns = std::max(r.last_used_ns, v.model->LastUsedNs());
      r.requests += v.model->InFlight();
      r.open_sequences += v.model->stats().sequences.active.load(std::memory_order_relaxed);
      r.pinned = r.pinned || PinnedByConfig(v.model->config()) ||
                 std::find(pinned_names.begin(), pinned_names.end(), name) != pinned_names.end();
      if (!IsEnsemble(v.model->config())) continue;
      for (const auto& step : v.model->config().ensemble_scheduling().step()) {
        (*composing)[step.model_name()].push_back(name);
        if (v.model->InFlight() > 0) held_by[step.model_name()] = name;
      }
    }
  }
  std::vector<ResidentModel> out;
  for (auto& [name, r] : by_name) {
    if (auto held = held_by.find(name); held != held_by.end()) r.ensemble_in_use = held->second;
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<ModelTable::Retired> ModelTable::BeginEvict(const std::string& name) {
  WriterLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return std::nullopt;
  bool any = false;
  for (const auto& [number, v] : it->second.versions) {
    if (!v.model) continue;
    any = true;
    // Only the table holds it: whoever looked it up has let go, and a
    // request it handed in is counted in flight before that (the fence
    // pairs with the holder's release of its reference).
    if (v.model.use_count() > 1) return std::nullopt;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (v.model->InFlight() > 0 || v.model->stats().sequences.active.load(std::memory_order_relaxed) > 0) {
      return std::nullopt;
    }
  }
  if (!any) return std::nullopt;
  Retired retired;
  for (auto& [number, v] : it->second.versions) {
    if (v.model) retired.push_back(v.model);
    v.state = ModelState::kUnloading;
    v.reason = "unloading to make room (model memory budget)";
  }
  it->second.canary.reset();
  it->second.rollout.reset();
  return retired;
}

void ModelTable::FinishEvict(const std::string& name) {
  WriterLock lock(mu_);
  ModelRecord& record = models_[name];
  std::string stamp = std::move(record.dir_stamp);
  record = ModelRecord{};
  record.reason = "unloaded to make room (model memory budget)";
  record.unloaded = true;
  record.dir_stamp = std::move(stamp);
}

ModelTable::Retired ModelTable::TakeAllForShutdown() {
  Retired models;
  WriterLock lock(mu_);
  for (auto& [name, record] : models_) {
    for (auto& [number, v] : record.versions) {
      if (!v.model) continue;
      models.push_back(v.model);
      if (v.state == ModelState::kReady) v.state = ModelState::kUnloading;
    }
  }
  return models;
}

}  // namespace ortserve

#include "fakes/FakeRepository.h"

#include <algorithm>
#include <utility>

namespace ortserve {

void FakeRepository::Add(std::shared_ptr<Model> model) {
  std::lock_guard lock(mu_);
  const std::string name = model->name();
  models_[name] = std::move(model);
}

void FakeRepository::AddUnavailable(std::string name, std::string version, std::string reason) {
  std::lock_guard lock(mu_);
  unavailable_.push_back({std::move(name), std::move(version), ModelState::kUnavailable, std::move(reason)});
}

Result<std::shared_ptr<Model>> FakeRepository::GetModel(const std::string& name,
                                                        const std::string& version) const {
  ++lookups;
  std::lock_guard lock(mu_);
  if (auto it = models_.find(name); it != models_.end() && (version.empty() || version == it->second->version())) {
    return it->second;
  }
  for (const ModelIndexEntry& entry : unavailable_) {
    if (entry.name == name) return ModelNotReadyError(name, version, entry.reason);
  }
  return UnknownModelError(name, version);
}

std::vector<ModelIndexEntry> FakeRepository::Index() const {
  std::lock_guard lock(mu_);
  std::vector<ModelIndexEntry> index = unavailable_;
  for (const auto& [name, model] : models_) index.push_back({name, model->version(), ModelState::kReady, ""});
  std::stable_sort(index.begin(), index.end(),
                   [](const ModelIndexEntry& a, const ModelIndexEntry& b) { return a.name < b.name; });
  return index;
}

std::vector<std::shared_ptr<Model>> FakeRepository::ReadyModels() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Model>> ready;
  for (const auto& [name, model] : models_) ready.push_back(model);
  return ready;
}

void FakeRepository::LoadAsync(const std::string& name, std::function<void(Status)> done) {
  if (control_mode_ != ModelControlMode::kExplicit) return ModelRepository::LoadAsync(name, std::move(done));
  ++loads;
  done(Status::Ok());
}

void FakeRepository::UnloadAsync(const std::string& name, std::function<void(Status)> done) {
  if (control_mode_ != ModelControlMode::kExplicit) return ModelRepository::UnloadAsync(name, std::move(done));
  ++unloads;
  done(Status::Ok());
}

}  // namespace ortserve

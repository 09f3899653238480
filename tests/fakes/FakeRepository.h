#pragma once
// A ModelRepository over models the test adds, for the front-end and metrics
// tests. GetModel serves the added models (any version when asked for none);
// AddUnavailable lists a model UNAVAILABLE in the index, and GetModel answers
// it kUnavailable with its reason. Live model management answers at once on
// the caller's thread: in explicit mode every load and unload succeeds (and is
// counted), in the other modes it is refused as the real repository refuses
// it. Thread-safe once the test has added its models.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "repository/ModelRepository.h"

namespace ortserve {

class FakeRepository : public ModelRepository {
 public:
  void Add(std::shared_ptr<Model> model);
  void AddUnavailable(std::string name, std::string version, std::string reason);
  void set_control_mode(ModelControlMode mode) { control_mode_ = mode; }

  void LoadAll() override {}
  using ModelRepository::Shutdown;
  void Shutdown(Clock::time_point) override {}
  Result<std::shared_ptr<Model>> GetModel(const std::string& name, const std::string& version) const override;
  // Added and unavailable models, sorted by name.
  std::vector<ModelIndexEntry> Index() const override;
  std::vector<std::shared_ptr<Model>> ReadyModels() const override;
  bool AllModelsReady() const override { return all_ready.load(); }

  ModelControlMode control_mode() const override { return control_mode_; }
  void LoadAsync(const std::string& name, std::function<void(Status)> done) override;
  void UnloadAsync(const std::string& name, std::function<void(Status)> done) override;

  // GetModel calls so far.
  mutable std::atomic<int> lookups{0};
  // What AllModelsReady answers.
  std::atomic<bool> all_ready{true};
  // Loads and unloads accepted (explicit mode); read them on the thread that
  // asked for them.
  int loads = 0;
  int unloads = 0;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Model>> models_;  // guarded by mu_
  std::vector<ModelIndexEntry> unavailable_;              // guarded by mu_
  ModelControlMode control_mode_ = ModelControlMode::kNone;
};

}  // namespace ortserve

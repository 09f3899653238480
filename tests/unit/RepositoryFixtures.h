#pragma once
// Fixtures shared by the repository unit tests that load real models: a
// fresh repository folder per test under the temp dir (removed afterwards),
// writing model versions (tests/data/repository/*.onnx) and config.pbtxt into
// it, starting a ModelRepository over it, reading its index, and running one
// request to completion.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "repository/ModelRepository.h"

namespace ortserve::testing_util {

// Small real models: add_sub.onnx (INPUT0 + INPUT1 over [N,4]), fixed.onnx,
// vector.onnx, ...
inline const std::filesystem::path kTestModels =
    std::filesystem::path(ORTSERVE_SOURCE_DIR) / "tests" / "data" / "repository";

// The entry of name:version in `index`; `version` nullopt: the first of `name`.
inline std::optional<ModelIndexEntry> FindIndexEntry(
    const std::vector<ModelIndexEntry>& index, const std::string& name,
    const std::optional<std::string>& version = std::nullopt) {
  for (const auto& e : index) {
    if (e.name == name && (!version || e.version == *version)) return e;
  }
  return std::nullopt;
}

// "name:version STATE reason" per line: what a failed expectation prints.
inline std::string DescribeIndex(const std::vector<ModelIndexEntry>& index) {
  std::string s;
  for (const auto& e : index) {
    s += e.name + ":" + e.version + " " + ModelStateName(e.state) + " " + e.reason + "\n";
  }
  return s;
}

// Hands `request` to `model` and waits for its completion (the scheduler may
// answer on its own thread).
inline Result<InferenceResponse> InferAndWait(Model& model,
                                              std::unique_ptr<InferenceRequest> request) {
  std::promise<Result<InferenceResponse>> result;
  auto future = result.get_future();
  request->on_complete = [&result](Result<InferenceResponse> r) { result.set_value(std::move(r)); };
  model.Infer(std::move(request));
  return future.get();
}

class TempRepositoryTest : public testing::Test {
 protected:
  void SetUp() override {
    // One folder per test; a parameterized test's names contain '/', which
    // would nest it in folders that TearDown does not remove.
    std::string name = std::string(testing::UnitTest::GetInstance()->current_test_suite()->name()) + "_" +
                       testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    root_ = std::filesystem::temp_directory_path() / ("ortserve_repo_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override {
    if (repo_) repo_->Shutdown();
    repo_.reset();
    std::filesystem::remove_all(root_);
  }

  // <root>/<name>/<version>/<filename>, a copy of kTestModels/<onnx>
  // (replacing what is there); an empty `onnx` creates the folder only.
  void AddVersion(const std::string& name, const std::string& version,
                  const std::string& onnx = "add_sub.onnx",
                  const std::string& filename = "model.onnx") {
    std::filesystem::create_directories(root_ / name / version);
    if (onnx.empty()) return;
    std::filesystem::copy_file(kTestModels / onnx, root_ / name / version / filename,
                               std::filesystem::copy_options::overwrite_existing);
  }
  // <root>/<name>/config.pbtxt, replacing what is there.
  void WriteConfig(const std::string& name, const std::string& config) {
    std::ofstream(root_ / name / "config.pbtxt", std::ios::trunc) << config;
  }
  // A model with these versions of one file, and a config.pbtxt unless empty.
  void AddModel(const std::string& name, const std::string& onnx,
                const std::vector<std::string>& versions = {"1"}, const std::string& config = "",
                const std::string& filename = "model.onnx") {
    for (const auto& version : versions) AddVersion(name, version, onnx, filename);
    if (!config.empty()) WriteConfig(name, config);
  }

  // Creates the repository over root_ (options.repository_path is set here)
  // and loads it.
  ModelRepository& StartRepository(RepositoryOptions options) {
    options.repository_path = root_.string();
    auto created = ModelRepository::Create(std::move(options));
    EXPECT_TRUE(created.ok()) << created.status().message();
    repo_ = std::move(created).value();
    repo_->LoadAll();
    return *repo_;
  }

  // The repository's index entry of name:version (see FindIndexEntry).
  std::optional<ModelIndexEntry> IndexEntry(
      const std::string& name, const std::optional<std::string>& version = std::nullopt) const {
    return FindIndexEntry(repo_->Index(), name, version);
  }

  std::filesystem::path root_;
  std::unique_ptr<ModelRepository> repo_;
};

}  // namespace ortserve::testing_util

// ListedModels: a listed model's preparation is kept while its folder's
// stamp (ListedStamp) is unchanged -- a second request prepares nothing --
// and done again once config.pbtxt, a version file or a model-level file
// changed; failures are kept too; the entries stay one per wanted model; a
// load takes the kept preparation while the folder is unchanged.
#include "repository/ListedModels.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "repository/ModelDirectory.h"
#include "repository/ModelPreparation.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::trunc) << text;
}

// A file's mtime moved on by a second: a change even where the clock is coarse.
void Touch(const fs::path& path) { fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(1)); }

class ListedModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / ("ortserve_listed_" + std::to_string(::getpid()));
    fs::remove_all(repo_);
    Write(repo_ / "m/config.pbtxt", "name: \"m\"\n");
    Write(repo_ / "m/1/model.onnx", "one");
  }
  void TearDown() override { fs::remove_all(repo_); }

  // Prepares by listing the version folders (failing when the config says
  // "broken"); the preparation kept for a load is named after the model.
  ListedModels Make() {
    return ListedModels(
        [this](const std::string& name) {
          auto model = std::make_shared<PreparedModel>();
          model->name = name;
          return ListedModels::Prepared{List(name), std::move(model)};
        },
        [this](const std::string& name) { return ListedStamp(repo_ / name); },
        [this](const std::string& name) { return fs::is_directory(repo_ / name); });
  }
  ListedModels::Listed List(const std::string& name) {
    ++preparations_;
    std::ifstream in(repo_ / name / "config.pbtxt");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("broken") != std::string::npos) return Unavailable("config of '" + name + "' is broken");
    ModelRepository::ListedModel listed;
    listed.config.set_name(name);
    std::set<std::string> versions;
    for (const auto& entry : fs::directory_iterator(repo_ / name)) {
      if (entry.is_directory()) versions.insert(entry.path().filename().string());
    }
    listed.versions.assign(versions.begin(), versions.end());
    return listed;
  }

  fs::path repo_;
  std::atomic<int> preparations_{0};
};

TEST_F(ListedModelsTest, AnUnchangedFolderIsPreparedOnce) {
  ListedModels listed = Make();
  for (int i = 0; i < 5; ++i) {
    auto got = listed.Get("m");
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got->config.name(), "m");
    EXPECT_EQ(got->versions, std::vector<std::string>{"1"});
  }
  EXPECT_EQ(preparations_, 1);
}

TEST_F(ListedModelsTest, ATouchedConfigIsPreparedAgain) {
  ListedModels listed = Make();
  ASSERT_TRUE(listed.Get("m").ok());
  Touch(repo_ / "m/config.pbtxt");
  ASSERT_TRUE(listed.Get("m").ok());
  EXPECT_EQ(preparations_, 2);
  ASSERT_TRUE(listed.Get("m").ok());
  EXPECT_EQ(preparations_, 2);
}

TEST_F(ListedModelsTest, ANewVersionFileIsPreparedAgain) {
  ListedModels listed = Make();
  ASSERT_TRUE(listed.Get("m").ok());
  Write(repo_ / "m/2/model.onnx", "two");
  auto got = listed.Get("m");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->versions, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(preparations_, 2);
  Write(repo_ / "m/2/extra.bin", "x");  // another file in a version folder
  ASSERT_TRUE(listed.Get("m").ok());
  EXPECT_EQ(preparations_, 3);
}

TEST_F(ListedModelsTest, AChangedModelLevelFileIsPreparedAgain) {
  Write(repo_ / "m/labels.txt", "a\n");
  ListedModels listed = Make();
  ASSERT_TRUE(listed.Get("m").ok());
  Touch(repo_ / "m/labels.txt");
  ASSERT_TRUE(listed.Get("m").ok());
  EXPECT_EQ(preparations_, 2);
}

TEST_F(ListedModelsTest, AFailureIsKeptUntilTheFolderChanges) {
  Write(repo_ / "m/config.pbtxt", "broken\n");
  ListedModels listed = Make();
  EXPECT_EQ(listed.Get("m").status().message(), "config of 'm' is broken");
  EXPECT_EQ(listed.Get("m").status().message(), "config of 'm' is broken");
  EXPECT_EQ(preparations_, 1);
  Write(repo_ / "m/config.pbtxt", "name: \"m\" # fixed, and longer\n");
  EXPECT_TRUE(listed.Get("m").ok());
  EXPECT_EQ(preparations_, 2);
}

TEST_F(ListedModelsTest, OneEntryPerWantedModel) {
  Write(repo_ / "n/1/model.onnx", "n");
  Write(repo_ / "o/1/model.onnx", "o");
  ListedModels listed = Make();
  ASSERT_TRUE(listed.Get("m").ok());
  ASSERT_TRUE(listed.Get("n").ok());
  Touch(repo_ / "m/config.pbtxt");
  ASSERT_TRUE(listed.Get("m").ok());  // replaces its entry
  EXPECT_EQ(listed.size(), 2u);
  fs::remove_all(repo_ / "n");
  ASSERT_TRUE(listed.Get("o").ok());  // a new entry drops the removed model's
  EXPECT_EQ(listed.size(), 2u);
  listed.Forget("o");
  EXPECT_EQ(listed.size(), 1u);
  EXPECT_EQ(preparations_, 4);
}

TEST_F(ListedModelsTest, ALoadReusesThePreparationWhileTheFolderIsUnchanged) {
  ListedModels listed = Make();
  EXPECT_EQ(listed.Reuse("m"), nullptr);  // nothing prepared yet
  ASSERT_TRUE(listed.Get("m").ok());
  std::shared_ptr<const PreparedModel> kept = listed.Reuse("m");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->name, "m");
  EXPECT_EQ(listed.Reuse("m"), kept);
  Touch(repo_ / "m/1/model.onnx");
  EXPECT_EQ(listed.Reuse("m"), nullptr);  // changed since: the load prepares it again
  EXPECT_EQ(preparations_, 1);           // Reuse never prepares
}

TEST_F(ListedModelsTest, ConcurrentRequestsShareOnePreparation) {
  ListedModels listed = Make();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto got = listed.Get("m");
        if (!got.ok() || got->config.name() != "m" || got->versions.empty()) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(preparations_, 1);  // the others waited for the first one's
  EXPECT_EQ(listed.size(), 1u);
}

}  // namespace
}  // namespace ortserve

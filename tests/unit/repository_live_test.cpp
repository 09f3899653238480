// Live model management: explicit load/unload, reloads that swap a changed
// version in atomically, failed reloads that keep the old version serving,
// unloads that wait for in-flight requests, polling, and the canary split.
// Small real models (tests/data/repository) in a temp repository; no test
// asserts on timing (the only waits are bounded polls for a state).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "serving/WeightedVersionPicker.h"
#include "repository/ModelRepository.h"

#include "RepositoryFixtures.h"
#include "TestTensors.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;
using testing_util::DescribeIndex;

// add_sub.onnx: OUTPUT0 = INPUT0 + INPUT1 over [batch, 4].
std::unique_ptr<InferenceRequest> AddSubRequest(CompletionCallback done = {}) {
  auto request = std::make_unique<InferenceRequest>();
  request->inputs = {testing_util::Fp32("INPUT0", {1, 4}, {1, 2, 3, 4}), testing_util::Fp32("INPUT1", {1, 4}, {1, 1, 1, 1})};
  request->requested_outputs = {{"OUTPUT0", false}};
  request->on_complete = std::move(done);
  return request;
}

void ExpectServes(Model& model) {
  auto response = testing_util::InferAndWait(model, AddSubRequest());
  ASSERT_TRUE(response.ok()) << response.status().message();
  ASSERT_EQ(response->outputs.size(), 1u);
  float out[4];
  ASSERT_EQ(response->outputs[0].data.size(), sizeof(out));
  std::memcpy(out, response->outputs[0].data.data(), sizeof(out));
  EXPECT_EQ(out[3], 5.0f);
}

class LiveRepository : public testing_util::TempRepositoryTest {
 protected:
  ModelRepository& Start(ModelControlMode mode, std::vector<std::string> startup = {}) {
    RepositoryOptions options;
    options.thread_budget = 4;
    options.control_mode = mode;
    options.poll_interval = std::chrono::hours(24);  // tests poll by hand
    options.startup_models = std::move(startup);
    return StartRepository(std::move(options));
  }
};

TEST_F(LiveRepository, ExplicitModeStartsWithRequestedModelsThenLoadsAndUnloads) {
  AddVersion("a", "1");
  AddVersion("b", "1");
  auto& repo = Start(ModelControlMode::kExplicit, {"b"});
  EXPECT_EQ(repo.control_mode(), ModelControlMode::kExplicit);
  ASSERT_TRUE(repo.GetModel("b", "").ok());
  EXPECT_EQ(repo.GetModel("a", "").status().code(), StatusCode::kNotFound);
  auto a_entry = IndexEntry("a", "");
  ASSERT_TRUE(a_entry) << DescribeIndex(repo.Index());
  EXPECT_EQ(a_entry->reason, "not loaded");
  EXPECT_TRUE(repo.AllModelsReady()) << "models never loaded do not make the server unready";

  ASSERT_TRUE(repo.Load("a").ok());
  auto a = repo.GetModel("a", "");
  ASSERT_TRUE(a.ok()) << a.status().message();
  ExpectServes(**a);

  ASSERT_TRUE(repo.Unload("a").ok());
  EXPECT_FALSE((*a)->ready()) << "the unloaded model stops taking requests";
  auto gone = repo.GetModel("a", "");
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable);
  // Triton's words (its L0_lifecycle matches them), then ortserve's reason.
  EXPECT_EQ(gone.status().message(), "Request for unknown model: 'a' has no available versions: unloaded");
  a_entry = IndexEntry("a", "");
  ASSERT_TRUE(a_entry) << DescribeIndex(repo.Index());
  EXPECT_EQ(a_entry->state, ModelState::kUnavailable);
  EXPECT_EQ(a_entry->reason, "unloaded");
  EXPECT_TRUE(repo.AllModelsReady()) << "an unloaded model does not make the server unready";
  ASSERT_TRUE(repo.GetModel("b", "").ok()) << "other models are untouched";

  // Loaded again after an unload.
  ASSERT_TRUE(repo.Load("a").ok());
  ExpectServes(*repo.GetModel("a", "").value());

  Status missing = repo.Load("nope");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("nope"), std::string::npos);
  EXPECT_EQ(repo.Load("../a").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.Load("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.Unload("nope").code(), StatusCode::kNotFound);
}

TEST_F(LiveRepository, StartupStarLoadsEverything) {
  AddVersion("a", "1");
  AddVersion("b", "1");
  auto& repo = Start(ModelControlMode::kExplicit, {"*"});
  EXPECT_TRUE(repo.GetModel("a", "").ok());
  EXPECT_TRUE(repo.GetModel("b", "").ok());
}

TEST_F(LiveRepository, LoadIsRefusedOutsideExplicitMode) {
  AddVersion("a", "1");
  auto& repo = Start(ModelControlMode::kNone);
  Status st = repo.Load("a");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("explicit model load / unload is not allowed"), std::string::npos) << st.message();
  EXPECT_EQ(repo.Unload("a").code(), StatusCode::kUnavailable);
  EXPECT_TRUE(repo.GetModel("a", "").ok()) << "a refused unload changes nothing";
  EXPECT_NE(ModelControlDisabledMessage(ModelControlMode::kPoll).find("polling is enabled"), std::string::npos);
}

TEST_F(LiveRepository, ChangedVersionIsSwappedInAndUnchangedKeepsServing) {
  AddVersion("m", "1");
  WriteConfig("m", "max_batch_size: 4\n");
  auto& repo = Start(ModelControlMode::kExplicit, {"m"});
  auto old = repo.GetModel("m", "").value();
  EXPECT_EQ(old->config().max_batch_size(), 4);

  // Nothing changed: the serving model stays (no reload).
  ASSERT_TRUE(repo.Load("m").ok());
  EXPECT_EQ(repo.GetModel("m", "").value(), old);

  WriteConfig("m", "max_batch_size: 16\n");
  ASSERT_TRUE(repo.Load("m").ok());
  auto fresh = repo.GetModel("m", "").value();
  EXPECT_NE(fresh, old);
  EXPECT_EQ(fresh->config().max_batch_size(), 16);
  ExpectServes(*fresh);
  EXPECT_FALSE(old->ready()) << "the replaced load is drained and shut down";
  EXPECT_EQ(IndexEntry("m", "1")->state, ModelState::kReady);
}

TEST_F(LiveRepository, FailedReloadKeepsTheOldVersionServing) {
  AddVersion("m", "1");
  auto& repo = Start(ModelControlMode::kExplicit, {"m"});
  auto old = repo.GetModel("m", "").value();

  std::ofstream(root_ / "m" / "1" / "model.onnx", std::ios::trunc) << "definitely not an onnx file";
  Status st = repo.Load("m");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'m'"), std::string::npos) << st.message();
  auto serving = repo.GetModel("m", "");
  ASSERT_TRUE(serving.ok()) << serving.status().message();
  EXPECT_EQ(serving.value(), old);
  ExpectServes(*old);
  auto entry = IndexEntry("m", "1");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->state, ModelState::kReady);
  EXPECT_NE(entry->reason.find("keeps serving"), std::string::npos) << entry->reason;

  // A broken config.pbtxt fails the whole model: still the old load serves.
  WriteConfig("m", "max_batch_size: [ 8\n");
  EXPECT_FALSE(repo.Load("m").ok());
  EXPECT_EQ(repo.GetModel("m", "").value(), old);

  // Fixed: the next load replaces it.
  fs::remove(root_ / "m" / "config.pbtxt");
  AddVersion("m", "1");
  ASSERT_TRUE(repo.Load("m").ok());
  auto fresh = repo.GetModel("m", "").value();
  EXPECT_NE(fresh, old);
  ExpectServes(*fresh);
  EXPECT_EQ(IndexEntry("m", "1")->reason, "");
}

TEST_F(LiveRepository, UnloadWaitsForTheRequestInFlight) {
  AddVersion("m", "1");
  auto& repo = Start(ModelControlMode::kExplicit, {"m"});
  auto model = repo.GetModel("m", "").value();

  // The request's completion blocks the instance's worker until released: the
  // request is "in flight" for as long as the test wants.
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> completed{false};
  model->Infer(AddSubRequest([&, released](Result<InferenceResponse> r) {
    EXPECT_TRUE(r.ok()) << r.status().message();
    entered.set_value();
    released.wait();
    completed = true;
  }));
  entered.get_future().wait();

  std::promise<bool> unloaded;  // value: was the request finished by then?
  auto unloaded_future = unloaded.get_future();
  repo.UnloadAsync("m", [&](Status st) {
    EXPECT_TRUE(st.ok()) << st.message();
    unloaded.set_value(completed.load());
  });

  // The unload starts at once: new requests are refused while it drains.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (IndexEntry("m", "1").value_or(ModelIndexEntry{}).state != ModelState::kUnloading &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(IndexEntry("m", "1").value_or(ModelIndexEntry{}).state, ModelState::kUnloading)
      << DescribeIndex(repo.Index());
  EXPECT_EQ(repo.GetModel("m", "").status().code(), StatusCode::kUnavailable);
  EXPECT_NE(unloaded_future.wait_for(std::chrono::seconds(0)), std::future_status::ready)
      << "the unload finished while a request was still running";

  release.set_value();
  EXPECT_TRUE(unloaded_future.get()) << "the unload answered before the in-flight request finished";
  EXPECT_EQ(IndexEntry("m", "")->reason, "unloaded");
}

TEST_F(LiveRepository, PollLoadsAddedReloadsChangedAndRemovesDeleted) {
  AddVersion("a", "1");
  auto& repo = Start(ModelControlMode::kPoll);
  auto a1 = repo.GetModel("a", "").value();

  repo.Poll();  // nothing changed
  EXPECT_EQ(repo.GetModel("a", "").value(), a1);

  AddVersion("b", "1");
  AddVersion("a", "2");  // latest policy: 2 replaces 1
  repo.Poll();
  auto b = repo.GetModel("b", "");
  ASSERT_TRUE(b.ok()) << b.status().message();
  ExpectServes(**b);
  auto a2 = repo.GetModel("a", "").value();
  EXPECT_EQ(a2->version(), "2");
  EXPECT_EQ(repo.GetModel("a", "1").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(a1->ready());

  fs::remove_all(root_ / "b");
  repo.Poll();
  EXPECT_EQ(repo.GetModel("b", "").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(IndexEntry("b", "1"));
  EXPECT_FALSE((*b)->ready());
  EXPECT_EQ(repo.GetModel("a", "").value(), a2);
}

TEST(VersionWeightsParse, AcceptsListsAndNamesErrors) {
  auto w = ParseVersionWeights(" 1:90, 2:10 ");
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->size(), 2u);
  EXPECT_EQ((*w)[0].version, 1);
  EXPECT_EQ((*w)[1].weight, 10);
  for (const char* bad : {"", "1", "1:x", "0:5", "1:-1", "1:1,1:2", "1:0,2:0", "1:5,"}) {
    auto r = ParseVersionWeights(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("version_weights"), std::string::npos) << r.status().message();
  }
}

TEST(WeightedVersionPicker, SmoothAndExact) {
  WeightedVersionPicker picker({{1, 3}, {2, 1}});
  std::vector<int64_t> picks;
  for (int i = 0; i < 8; ++i) picks.push_back(*picker.Pick([](int64_t) { return true; }));
  EXPECT_EQ(picks, (std::vector<int64_t>{1, 1, 2, 1, 1, 1, 2, 1}));
  EXPECT_EQ(*picker.Pick([](int64_t v) { return v == 2; }), 2);
  EXPECT_FALSE(picker.Pick([](int64_t) { return false; }));
}

TEST_F(LiveRepository, CanarySplitsUnversionedRequestsByWeight) {
  AddVersion("c", "1");
  AddVersion("c", "2");
  WriteConfig("c", R"(version_policy { all { } }
parameters { key: "version_weights" value { string_value: "1:3,2:1" } })");
  AddVersion("fallback", "1");
  AddVersion("fallback", "2");
  WriteConfig("fallback", R"(version_policy { all { } }
parameters { key: "version_weights" value { string_value: "7:1" } })");
  AddVersion("badweights", "1");
  WriteConfig("badweights", R"(parameters { key: "version_weights" value { string_value: "1:lots" } })");
  auto& repo = Start(ModelControlMode::kExplicit, {"*"});

  std::map<std::string, int> counts;
  for (int i = 0; i < 400; ++i) counts[repo.GetModel("c", "").value()->version()]++;
  EXPECT_EQ(counts["1"], 300);
  EXPECT_EQ(counts["2"], 100);
  EXPECT_EQ(repo.GetModel("c", "2").value()->version(), "2") << "a named version is never redirected";

  // Requests go to the picked version; statistics are per version.
  auto picked = repo.GetModel("c", "").value();
  ExpectServes(*picked);
  EXPECT_EQ(picked->stats().success.count.load(), 1u);

  // Weights naming no ready version: the policy's newest ready version.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(repo.GetModel("fallback", "").value()->version(), "2");

  auto bad = IndexEntry("badweights", "");
  ASSERT_TRUE(bad) << DescribeIndex(repo.Index());
  EXPECT_EQ(bad->state, ModelState::kUnavailable);
  EXPECT_NE(bad->reason.find("version_weights"), std::string::npos) << bad->reason;

  // Version 2 unloaded from the split (policy now selects only 1): all to 1.
  WriteConfig("c", R"(version_policy { specific { versions: [ 1 ] } }
parameters { key: "version_weights" value { string_value: "1:3,2:1" } })");
  ASSERT_TRUE(repo.Load("c").ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(repo.GetModel("c", "").value()->version(), "1");
}

TEST_F(LiveRepository, TheShadowVersionTakesNoUnversionedRequests) {
  for (const char* v : {"1", "2", "3"}) {
    AddVersion("s", v);
    AddVersion("r", v);
  }
  WriteConfig("s", R"(version_policy { all { } }
parameters { key: "shadow_version" value { string_value: "3" } }
parameters { key: "shadow_fraction" value { string_value: "1" } })");
  // With a rollout: its stable and candidate are the two newest other versions.
  WriteConfig("r", R"(version_policy { all { } }
parameters { key: "shadow_version" value { string_value: "3" } }
parameters { key: "shadow_fraction" value { string_value: "0.5" } }
parameters { key: "rollout_steps" value { string_value: "50" } }
parameters { key: "rollout_step_seconds" value { string_value: "600" } }
parameters { key: "rollout_max_error_rate" value { string_value: "0.5" } })");
  auto& repo = Start(ModelControlMode::kExplicit, {"*"});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(repo.GetModel("s", "").value()->version(), "2");
  EXPECT_EQ(repo.GetModel("s", "3").value()->version(), "3") << "a named version is never redirected";
  // Every version but the shadow one shadows its requests.
  EXPECT_NE(repo.GetModel("s", "1").value()->shadow(), nullptr);
  EXPECT_NE(repo.GetModel("s", "2").value()->shadow(), nullptr);
  EXPECT_EQ(repo.GetModel("s", "3").value()->shadow(), nullptr);
  auto rollout = repo.Rollout("r");
  ASSERT_TRUE(rollout.ok()) << rollout.status().message();
  EXPECT_TRUE(rollout->active);
  EXPECT_EQ(rollout->stable, 1);
  EXPECT_EQ(rollout->candidate, 2);
  std::map<std::string, int> counts;
  for (int i = 0; i < 100; ++i) counts[repo.GetModel("r", "").value()->version()]++;
  EXPECT_EQ(counts["3"], 0);
  EXPECT_EQ(counts["1"] + counts["2"], 100);
}

}  // namespace
}  // namespace ortserve

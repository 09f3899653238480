// parameters { key: "fallback_model" ... }: the load-time compatibility check
// and requests handed to the fallback when the primary's queue is full.
// Small real models (tests/data/repository) in a temp repository.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <vector>

#include <unistd.h>

#include "repository/ModelRepository.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kTestModels = fs::path(ORTSERVE_SOURCE_DIR) / "tests" / "data" / "repository";


std::string FallbackConfig(const std::string& fallback, const std::string& extra = "") {
  return "parameters { key: \"fallback_model\" value { string_value: \"" + fallback + "\" } }\n" + extra;
}

class FallbackRepository : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ortserve_fallback_" + std::to_string(::getpid()) + "_" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (repo_) repo_->Shutdown();
    repo_.reset();
    fs::remove_all(root_);
  }
  void AddModel(const std::string& name, const std::string& onnx, const std::string& config = "") {
    fs::create_directories(root_ / name / "1");
    fs::copy_file(kTestModels / onnx, root_ / name / "1" / "model.onnx");
    if (!config.empty()) std::ofstream(root_ / name / "config.pbtxt") << config;
  }
  ModelRepository& Start() {
    RepositoryOptions options;
    options.repository_path = root_.string();
    options.thread_budget = 2;
    auto created = ModelRepository::Create(std::move(options));
    EXPECT_TRUE(created.ok()) << created.status().message();
    repo_ = std::move(created).value();
    repo_->LoadAll();
    return *repo_;
  }
  std::optional<ModelIndexEntry> Entry(const std::string& name) {
    for (const auto& e : repo_->Index())
      if (e.name == name) return e;
    return std::nullopt;
  }

  fs::path root_;
  std::unique_ptr<ModelRepository> repo_;
};

// add_sub: OUTPUT0 = INPUT0 + INPUT1 over [N, 4].
std::unique_ptr<InferenceRequest> AddSubRequest(float base, CompletionCallback done) {
  auto r = std::make_unique<InferenceRequest>();
  r->inputs = {testing_util::Fp32("INPUT0", {1, 4}, {base, base, base, base}),
               testing_util::Fp32("INPUT1", {1, 4}, {1, 1, 1, 1})};
  r->requested_outputs = {{"OUTPUT0", false}};
  r->on_complete = std::move(done);
  return r;
}

TEST_F(FallbackRepository, CompatibleFallbackLoadsAndThePrimaryServesItself) {
  AddModel("small", "add_sub.onnx");
  AddModel("big", "add_sub.onnx", FallbackConfig("small"));
  auto& repo = Start();
  ASSERT_TRUE(repo.AllModelsReady());
  std::promise<Result<InferenceResponse>> p;
  repo.GetModel("big", "").value()->Infer(AddSubRequest(1, [&](auto r) { p.set_value(std::move(r)); }));
  auto r = p.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->model_name, "big");
  EXPECT_TRUE(r->parameters.empty());
}

TEST_F(FallbackRepository, IncompatibleFallbackFailsThePrimaryLoadNamingTheDifference) {
  AddModel("other", "fixed.onnx");  // X [2,3] -> Y: nothing like add_sub
  AddModel("big", "add_sub.onnx", FallbackConfig("other"));
  Start();
  auto big = Entry("big");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->state, ModelState::kUnavailable);
  EXPECT_NE(big->reason.find("fallback_model 'other'"), std::string::npos) << big->reason;
  EXPECT_EQ(Entry("other")->state, ModelState::kReady);
}

TEST_F(FallbackRepository, FallbackNamingTheModelItselfFails) {
  AddModel("big", "add_sub.onnx", FallbackConfig("big"));
  Start();
  EXPECT_EQ(Entry("big")->state, ModelState::kUnavailable);
  EXPECT_NE(Entry("big")->reason.find("itself"), std::string::npos) << Entry("big")->reason;
}

TEST_F(FallbackRepository, MissingFallbackStillLoadsThePrimary) {
  AddModel("big", "add_sub.onnx", FallbackConfig("nope"));
  Start();
  EXPECT_EQ(Entry("big")->state, ModelState::kReady);
}

// A burst at a primary with a queue of one: whatever overflows goes to the
// fallback; nothing is refused, and each response says who answered.
TEST_F(FallbackRepository, OverflowIsServedByTheFallbackAndCounted) {
  AddModel("small", "add_sub.onnx");
  AddModel("big", "add_sub.onnx",
           FallbackConfig("small", "max_batch_size: 4\n"
                                   "dynamic_batching { default_queue_policy { max_queue_size: 1 } }\n"
                                   "instance_group [ { count: 1 kind: KIND_CPU } ]\n"));
  auto& repo = Start();
  ASSERT_TRUE(repo.AllModelsReady());
  auto big = repo.GetModel("big", "").value();
  auto small = repo.GetModel("small", "").value();

  constexpr int kRequests = 400;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<Result<InferenceResponse>>> results(kRequests);
  int finished = 0;
  for (int i = 0; i < kRequests; ++i) {
    big->Infer(AddSubRequest(static_cast<float>(i), [&, i](Result<InferenceResponse> r) {
      std::lock_guard lock(mu);
      results[i] = std::move(r);
      ++finished;
      cv.notify_all();
    }));
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return finished == kRequests; }));
  }
  uint64_t by_fallback = 0;
  for (int i = 0; i < kRequests; ++i) {
    const auto& r = *results[i];
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().message();
    float out[4];
    ASSERT_EQ(r->outputs.at(0).data.size(), sizeof(out));
    std::memcpy(out, r->outputs[0].data.data(), sizeof(out));
    EXPECT_EQ(out[0], static_cast<float>(i) + 1);
    if (r->parameters.empty()) {
      EXPECT_EQ(r->model_name, "big");
    } else {
      ++by_fallback;
      EXPECT_EQ(r->model_name, "small");
      ASSERT_EQ(r->parameters.size(), 1u);
      EXPECT_EQ(r->parameters[0], (std::pair<std::string, std::string>{"ortserve_fallback_from", "big"}));
    }
  }
  const auto& fallbacks = big->stats().fallbacks;
  EXPECT_EQ(fallbacks[static_cast<size_t>(FallbackReason::kQueueFull)].load() +
                fallbacks[static_cast<size_t>(FallbackReason::kExpectedWait)].load(),
            by_fallback);
  EXPECT_EQ(big->stats().outcomes[static_cast<size_t>(RequestOutcome::kRejected)].load(), 0u);
  EXPECT_EQ(small->stats().outcomes[static_cast<size_t>(RequestOutcome::kSuccess)].load(), by_fallback);
  RecordProperty("served_by_fallback", static_cast<int>(by_fallback));
}

}  // namespace
}  // namespace ortserve

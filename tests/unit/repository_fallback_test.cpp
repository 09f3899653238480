// parameters { key: "fallback_model" ... }: the load-time compatibility check
// and requests handed to the fallback when the primary's queue is full.
// Small real models (tests/data/repository) in a temp repository.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "repository/ModelRepository.h"

#include "RepositoryFixtures.h"
#include "TestTensors.h"

namespace ortserve {
namespace {

using namespace std::chrono_literals;

std::string FallbackConfig(const std::string& fallback, const std::string& extra = "") {
  return "parameters { key: \"fallback_model\" value { string_value: \"" + fallback + "\" } }\n" + extra;
}

class FallbackRepository : public testing_util::TempRepositoryTest {
 protected:
  ModelRepository& Start() {
    RepositoryOptions options;
    options.thread_budget = 2;
    return StartRepository(std::move(options));
  }
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
  AddModel("big", "add_sub.onnx", {"1"}, FallbackConfig("small"));
  auto& repo = Start();
  ASSERT_TRUE(repo.AllModelsReady());
  auto r = testing_util::InferAndWait(*repo.GetModel("big", "").value(), AddSubRequest(1, {}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->model_name, "big");
  EXPECT_TRUE(r->parameters.empty());
}

TEST_F(FallbackRepository, IncompatibleFallbackFailsThePrimaryLoadNamingTheDifference) {
  AddModel("other", "fixed.onnx");  // X [2,3] -> Y: nothing like add_sub
  AddModel("big", "add_sub.onnx", {"1"}, FallbackConfig("other"));
  Start();
  auto big = IndexEntry("big");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->state, ModelState::kUnavailable);
  EXPECT_NE(big->reason.find("fallback_model 'other'"), std::string::npos) << big->reason;
  EXPECT_EQ(IndexEntry("other")->state, ModelState::kReady);
}

TEST_F(FallbackRepository, FallbackNamingTheModelItselfFails) {
  AddModel("big", "add_sub.onnx", {"1"}, FallbackConfig("big"));
  Start();
  EXPECT_EQ(IndexEntry("big")->state, ModelState::kUnavailable);
  EXPECT_NE(IndexEntry("big")->reason.find("itself"), std::string::npos) << IndexEntry("big")->reason;
}

TEST_F(FallbackRepository, MissingFallbackStillLoadsThePrimary) {
  AddModel("big", "add_sub.onnx", {"1"}, FallbackConfig("nope"));
  Start();
  EXPECT_EQ(IndexEntry("big")->state, ModelState::kReady);
}

// A burst at a primary with a queue of one: whatever overflows goes to the
// fallback; nothing is refused, and each response says who answered.
TEST_F(FallbackRepository, OverflowIsServedByTheFallbackAndCounted) {
  AddModel("small", "add_sub.onnx");
  AddModel("big", "add_sub.onnx", {"1"},
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

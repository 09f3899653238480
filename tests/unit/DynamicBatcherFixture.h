#pragma once
// The dynamic batcher's test fixture, driven through fake instances whose Run
// can be held at a gate (tests/fakes/FakeInstance.h) and a fake clock:
// batches are formed while instances are held busy, so which requests batch
// together is deterministic, and nothing depends on sleeping or asserts on
// timing. Parameterised over the instance count.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fakes/FakeInstance.h"
#include "fakes/FakeSchedulerClock.h"
#include "fakes/RecordedCompletions.h"
#include "scheduler/DynamicBatcher.h"

#include "TestTensors.h"

namespace ortserve::testing_util {

using namespace std::chrono_literals;

// Options of model 'fake' version '3' batching up to `max_batch_size` rows.
inline DynamicBatcherOptions BatchingOptions(int max_batch_size = 8) {
  DynamicBatcherOptions o;
  o.model_name = "fake";
  o.model_version = "3";
  o.batching.max_batch_size = max_batch_size;
  o.batching.dynamic_batching = true;
  // The default window is Triton's fixed one (DefaultWindowIsTritons checks
  // it); the adaptive window has tests of its own.
  return o;
}

class SchedulerTest : public ::testing::TestWithParam<int> {
 protected:
  size_t instances() const { return static_cast<size_t>(GetParam()); }
  uint64_t Outcome(RequestOutcome outcome) const { return stats_->outcomes[static_cast<size_t>(outcome)].load(); }

  void Start(DynamicBatcherOptions options) {
    owned_stats_ = std::make_unique<ModelStatistics>(options.batching.max_batch_size);
    stats_ = owned_stats_.get();
    auto created = DynamicBatcher::Create(std::move(options), MakeFakeInstances(model_, instances()), stats_,
                                          &completer_, clock_);
    ASSERT_TRUE(created.ok()) << created.status().message();
    scheduler_ = std::move(created).value();
  }

  // A request with INPUT0 = [rows, width] holding base, base + 1, ...
  std::unique_ptr<InferenceRequest> Request(const std::string& id, int64_t rows, int64_t width, float base) {
    std::vector<float> values;
    for (int64_t i = 0; i < rows * width; ++i) values.push_back(base + static_cast<float>(i));
    auto r = std::make_unique<InferenceRequest>();
    r->model_name = "fake";
    r->id = id;
    r->inputs.push_back(Fp32("INPUT0", {rows, width}, values));
    r->arrival_time = clock_->Now();
    r->on_complete = done_.For(id);
    return r;
  }

  void Submit(std::unique_ptr<InferenceRequest> r) { scheduler_->Submit(std::move(r)); }

  // Holds every instance busy in a Run of its own ("blocker-i", marker -1).
  void OccupyAllInstances() {
    model_->Hold();
    for (size_t i = 0; i < instances(); ++i) {
      Submit(Request("blocker-" + std::to_string(i), 1, 1, -1));
      ASSERT_TRUE(model_->WaitForRuns(i + 1));
    }
    ASSERT_EQ(scheduler_->BusyInstances(), instances());
  }

  // Four requests gathered by a fixed window run as one batch of 4 rows.
  void ExpectWindowedRequestsRunWhole(DynamicBatcherOptions options) {
    options.batching.max_queue_delay_us = 10'000'000;
    Start(options);
    for (int i = 0; i < 4; ++i) Submit(Request("r" + std::to_string(i), 1, 4, 100.f * (i + 1)));
    clock_->Advance(10s);
    for (int i = 0; i < 4; ++i) ExpectAddOne("r" + std::to_string(i), 1, 4, 100.f * (i + 1));
    auto runs = BatchRuns();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].shape, (Shape{4, 4}));
  }

  // The Runs after the blockers.
  std::vector<FakeInstanceControl::RunRecord> BatchRuns() {
    auto runs = model_->Runs();
    std::vector<FakeInstanceControl::RunRecord> rest;
    for (auto& run : runs)
      if (run.values.empty() || run.values.front() != -1) rest.push_back(std::move(run));
    return rest;
  }

  // Expects `id` succeeded with OUTPUT0 = its input + 1 (so it got its own rows).
  void ExpectAddOne(const std::string& id, int64_t rows, int64_t width, float base) {
    auto result = done_.Get(id);
    ASSERT_TRUE(result.ok()) << id << ": " << result.status().message();
    const InferenceResponse& response = result.value();
    EXPECT_EQ(response.model_name, "fake");
    EXPECT_EQ(response.model_version, "3");
    EXPECT_EQ(response.id, id);
    ASSERT_EQ(response.outputs.size(), 2u);
    EXPECT_EQ(response.outputs[0].name, "OUTPUT0");
    EXPECT_EQ(response.outputs[0].shape, (Shape{rows, width}));
    std::vector<float> expected;
    for (int64_t i = 0; i < rows * width; ++i) expected.push_back(base + static_cast<float>(i) + 1);
    EXPECT_EQ(Floats(response.outputs[0]), expected) << id;
  }

  std::shared_ptr<FakeSchedulerClock> clock_ = std::make_shared<FakeSchedulerClock>();
  std::shared_ptr<FakeInstanceControl> model_ = std::make_shared<FakeInstanceControl>();
  RecordedCompletions done_;
  CallbackCompleter completer_;
  std::unique_ptr<ModelStatistics> owned_stats_;
  ModelStatistics* stats_ = nullptr;
  std::unique_ptr<Scheduler> scheduler_;  // declared last: shut down first
};

inline std::string InstancesName(const ::testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "instances";
}

}  // namespace ortserve::testing_util

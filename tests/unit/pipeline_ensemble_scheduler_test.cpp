// The ensemble scheduler (pipeline/EnsembleScheduler.h) over fake composing
// models: tensors pass between steps without a copy, a failing step is
// named, a cancelled request or one whose timeout passed launches no further
// step, the timeout left and the priority reach each step, readiness follows
// the composing models, and statistics count once per request.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <thread>

#include "fakes/FakeModel.h"
#include "fakes/RecordedCompletions.h"
#include "pipeline/EnsembleScheduler.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

// a: X <- IN, OUT_X -> t; b: X <- t, OUT_X -> OUT (fake models echo each
// input X back as OUT_X, sharing its bytes).
EnsemblePlan ChainPlan() {
  EnsemblePlan plan;
  plan.name = "e";
  plan.steps = {{0, "a", -1, {{"X", "IN"}}, {{"OUT_X", "t"}}}, {1, "b", -1, {{"X", "t"}}, {{"OUT_X", "OUT"}}}};
  plan.inputs = {"IN"};
  plan.outputs = {"OUT"};
  return plan;
}

class EnsembleSchedulerTest : public ::testing::Test {
 protected:
  std::shared_ptr<FakeModel> AddModel(const std::string& name, FakeModel::Reply reply = FakeModel::Reply::kEcho,
                                      bool hold = false) {
    FakeModel::Options options;
    options.name = name;
    options.reply = reply;
    options.hold = hold;
    options.on = FakeModel::AnswerThread::kOwnThread;
    auto model = std::make_shared<FakeModel>(options);
    models_[name] = model;
    return model;
  }

  EnsembleScheduler& Start(EnsemblePlan plan = ChainPlan()) {
    auto lookup = std::make_shared<const ModelLookup>([this](const std::string& name, int64_t) {
      auto it = models_.find(name);
      return it == models_.end() ? nullptr : std::shared_ptr<Model>(it->second);
    });
    scheduler_ = std::make_unique<EnsembleScheduler>(std::move(plan), "1", /*batching=*/true, lookup, &stats_,
                                                     &completer_);
    return *scheduler_;
  }

  std::unique_ptr<InferenceRequest> Request(const std::string& id) {
    auto r = std::make_unique<InferenceRequest>();
    r->id = id;
    r->inputs = {testing_util::Fp32("IN", {1, 2}, {1.5f, -2.0f})};
    r->on_complete = recorded_.For(id);
    return r;
  }

  void TearDown() override {
    if (scheduler_) scheduler_->Shutdown();
  }

  std::map<std::string, std::shared_ptr<FakeModel>> models_;
  ModelStatistics stats_{8};
  CallbackCompleter completer_;
  RecordedCompletions recorded_;
  std::unique_ptr<EnsembleScheduler> scheduler_;
};

TEST_F(EnsembleSchedulerTest, TensorsPassBetweenStepsWithoutACopy) {
  AddModel("a");
  AddModel("b");
  auto request = Request("r1");
  const std::byte* input_bytes = request->inputs[0].data.data();
  Start().Submit(std::move(request));
  auto result = recorded_.Get("r1");
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result.value().outputs.size(), 1u);
  const Tensor& out = result.value().outputs[0];
  EXPECT_EQ(out.name, "OUT");
  EXPECT_EQ(out.shape, (Shape{1, 2}));
  EXPECT_EQ(out.data.data(), input_bytes);  // the client's buffer, through both steps
  EXPECT_EQ(result.value().model_name, "e");
  EXPECT_EQ(stats_.success.count.load(), 1u);
  EXPECT_EQ(stats_.inference_count.load(), 1u);
  EXPECT_EQ(stats_.execution_count.load(), 1u);
  EXPECT_EQ(stats_.fail.count.load(), 0u);
}

TEST_F(EnsembleSchedulerTest, AStepStartsAsSoonAsItsInputsExist) {
  // a: IN -> t; b: t -> u (held); c: t -> v; e: v -> W (held); d: u, v -> OUT.
  EnsemblePlan plan;
  plan.name = "e";
  plan.steps = {{0, "a", -1, {{"X", "IN"}}, {{"OUT_X", "t"}}},
                {1, "b", -1, {{"X", "t"}}, {{"OUT_X", "u"}}},
                {2, "c", -1, {{"X", "t"}}, {{"OUT_X", "v"}}},
                {3, "e", -1, {{"X", "v"}}, {{"OUT_X", "W"}}},
                {4, "d", -1, {{"X", "u"}, {"Y", "v"}}, {{"OUT_X", "OUT"}}}};
  plan.inputs = {"IN"};
  plan.outputs = {"OUT", "W"};
  AddModel("a");
  auto b = AddModel("b", FakeModel::Reply::kEcho, /*hold=*/true);
  AddModel("c");
  auto e = AddModel("e", FakeModel::Reply::kEcho, /*hold=*/true);
  AddModel("d");
  Start(std::move(plan)).Submit(Request("r1"));
  std::unique_ptr<InferenceRequest> step1 = b->TakeHeld();
  // Step 3 is launched while step 1 has not finished: its input exists.
  std::unique_ptr<InferenceRequest> step3 = e->TakeHeld();
  EXPECT_FALSE(recorded_.Done("r1"));
  e->Answer(*step3);
  EXPECT_FALSE(recorded_.Done("r1"));  // step 4 still waits for step 1's output
  b->Answer(*step1);
  auto result = recorded_.Get("r1");
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result.value().outputs.size(), 2u);
  EXPECT_EQ(result.value().outputs[0].name, "OUT");
  EXPECT_EQ(result.value().outputs[1].name, "W");
}

TEST_F(EnsembleSchedulerTest, AFailingStepIsNamedWithItsStatus) {
  AddModel("a");
  AddModel("b", FakeModel::Reply::kFail);
  Start().Submit(Request("r1"));
  auto result = recorded_.Get("r1");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
  EXPECT_EQ(result.status().message(), "in ensemble 'e', step 1 (model 'b'): fake");
  EXPECT_EQ(stats_.fail.count.load(), 1u);
  EXPECT_EQ(stats_.success.count.load(), 0u);
}

TEST_F(EnsembleSchedulerTest, ACancelledRequestLaunchesNoFurtherStep) {
  auto a = AddModel("a", FakeModel::Reply::kEcho, /*hold=*/true);
  auto b = AddModel("b");
  auto request = Request("r1");
  request->cancelled = std::make_shared<CancelToken>();
  CancelFlag cancelled = request->cancelled;
  Start().Submit(std::move(request));
  std::unique_ptr<InferenceRequest> step0 = a->TakeHeld();
  EXPECT_EQ(step0->cancelled, cancelled);  // the step carries the client's cancellation
  cancelled->Cancel();
  a->Answer(*step0);
  auto result = recorded_.Get("r1");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled);
  EXPECT_NE(result.status().message().find("step 1 (model 'b')"), std::string::npos) << result.status().message();
  EXPECT_EQ(b->LastCancelFlag(), nullptr);  // b never saw a request
}

TEST_F(EnsembleSchedulerTest, EachStepGetsTheTimeLeftAndThePriority) {
  auto a = AddModel("a");
  auto b = AddModel("b");
  auto request = Request("r1");
  request->timeout_us = 60'000'000;
  request->priority = 2;
  Start().Submit(std::move(request));
  ASSERT_TRUE(recorded_.Get("r1").ok());
  EXPECT_GT(b->last_timeout_us(), 0u);
  EXPECT_LE(b->last_timeout_us(), a->last_timeout_us());
  EXPECT_LE(a->last_timeout_us(), 60'000'000u);
  EXPECT_EQ(a->last_priority(), 2u);
  EXPECT_EQ(b->last_priority(), 2u);
}

TEST_F(EnsembleSchedulerTest, AnExpiredRequestLaunchesNoFurtherStep) {
  auto a = AddModel("a", FakeModel::Reply::kEcho, /*hold=*/true);
  auto b = AddModel("b");
  auto request = Request("r1");
  request->timeout_us = 1;
  request->arrival_time = Clock::now() - std::chrono::seconds(1);  // spent before it arrived here
  Start().Submit(std::move(request));
  auto result = recorded_.Get("r1");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("in ensemble 'e', step 0 (model 'a'): Request timeout expired"),
            std::string::npos)
      << result.status().message();
  EXPECT_EQ(stats_.outcomes[static_cast<size_t>(RequestOutcome::kTimeout)].load(), 1u);
  EXPECT_EQ(a->last_timeout_us(), 0u);  // neither step reached its model
  EXPECT_EQ(b->last_timeout_us(), 0u);
}

TEST_F(EnsembleSchedulerTest, ReadinessNamesAMissingComposingModel) {
  AddModel("a");
  EnsembleScheduler& scheduler = Start();
  Status readiness = scheduler.Readiness();
  EXPECT_EQ(readiness.code(), StatusCode::kUnavailable);
  EXPECT_EQ(readiness.message(), "ensemble 'e' depends on 'b' which has no loaded version.");
  scheduler.Submit(Request("r1"));
  auto result = recorded_.Get("r1");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("step 1 (model 'b'): ensemble 'e' depends on 'b'"), std::string::npos)
      << result.status().message();
  AddModel("b");
  EXPECT_TRUE(scheduler.Readiness().ok());
}

TEST_F(EnsembleSchedulerTest, ShutdownRefusesNewRequestsAfterAnsweringTheRunningOnes) {
  auto a = AddModel("a", FakeModel::Reply::kEcho, /*hold=*/true);
  AddModel("b");
  EnsembleScheduler& scheduler = Start();
  scheduler.Submit(Request("r1"));
  std::unique_ptr<InferenceRequest> step0 = a->TakeHeld();
  std::thread answer([&] { a->Answer(*step0); });
  scheduler.Shutdown();  // returns once r1 is answered
  answer.join();
  EXPECT_TRUE(recorded_.Done("r1"));
  EXPECT_TRUE(recorded_.Get("r1").ok());
  scheduler.Submit(Request("r2"));
  auto refused = recorded_.Get("r2");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "ensemble 'e' is shutting down");
}

TEST_F(EnsembleSchedulerTest, AtTheExitTimeoutRunningStepsAreCancelledAndTheRequestFails) {
  auto a = AddModel("a", FakeModel::Reply::kEcho, /*hold=*/true);
  auto b = AddModel("b");
  EnsembleScheduler& scheduler = Start();
  auto request = Request("r1");
  request->cancelled = std::make_shared<CancelToken>();
  CancelFlag cancelled = request->cancelled;
  scheduler.Submit(std::move(request));
  // Step 0's model answers only once the step is cancelled, as a run the
  // watchdog stops.
  std::thread model([&] {
    std::unique_ptr<InferenceRequest> step0 = a->TakeHeld();
    while (!step0->cancelled->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    a->Answer(*step0);
  });
  scheduler.Shutdown(Clock::now() + std::chrono::milliseconds(20));
  model.join();
  EXPECT_TRUE(cancelled->IsCancelled());
  auto result = recorded_.Get("r1");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(result.status().message(),
            "ensemble 'e' is shutting down: request 'r1' was not finished before the exit timeout");
  EXPECT_EQ(b->last_timeout_us(), 0u);
  EXPECT_EQ(b->LastCancelFlag(), nullptr);  // step 1 never started
}

}  // namespace
}  // namespace ortserve

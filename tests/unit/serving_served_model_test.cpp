// A served model's request path (serving/ServedModel.h) end to end over
// the dynamic batcher and fake instances: admission's refusals (counted in
// the model's statistics), response shaping, and Triton's statistics.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/ConfigParse.h"
#include "serving/ServedModel.h"

#include "DynamicBatcherFixture.h"

namespace ortserve {
namespace {

using namespace testing_util;

// Model 'fake' version '3' as a config says it: INPUT0 -> OUTPUT0, OUTPUT1,
// FP32 [-1] each, served by a dynamic batcher with `options`.
class ServedModelTest : public SchedulerTest {
 protected:
  void Start(DynamicBatcherOptions options) {
    inference::ModelConfig config;
    config.set_name("fake");
    config.set_max_batch_size(options.batching.max_batch_size);
    auto* input = config.add_input();
    input->set_name("INPUT0");
    input->set_data_type(inference::TYPE_FP32);
    input->add_dims(-1);
    for (const char* name : {"OUTPUT0", "OUTPUT1"}) {
      auto* output = config.add_output();
      output->set_name(name);
      output->set_data_type(inference::TYPE_FP32);
      output->add_dims(-1);
    }
    auto* batching = config.mutable_dynamic_batching();
    batching->set_priority_levels(options.queueing.priority_levels);
    batching->set_default_priority_level(options.queueing.default_priority_level);
    served_ = std::make_shared<ServedModel>(config, "3", std::vector<std::string>{"OUTPUT0", "OUTPUT1"}, nullptr);
    auto created = DynamicBatcher::Create(std::move(options), MakeFakeInstances(model_, instances()),
                                          &served_->stats(), served_->completer(), clock_);
    ASSERT_TRUE(created.ok()) << created.status().message();
    served_->Start(std::move(created).value());
    stats_ = &served_->stats();
  }
  void Submit(std::unique_ptr<InferenceRequest> r) { served_->Infer(std::move(r)); }

  std::shared_ptr<ServedModel> served_;  // destroyed before the fixture's completions
};

INSTANTIATE_TEST_SUITE_P(Instances, ServedModelTest, ::testing::Values(1, 2, 4), InstancesName);

// ---- admission --------------------------------------------------------------------

TEST_P(ServedModelTest, RequestLargerThanMaxBatchSizeIsRejected) {
  Start(BatchingOptions(4));
  Submit(Request("big", 5, 1, 0));
  ASSERT_TRUE(done_.Done("big"));  // answered inside Infer
  auto result = done_.Get("big");
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("max_batch_size 4"), std::string::npos);
}

TEST_P(ServedModelTest, MalformedRequestIsRejectedBeforeItCanJoinABatch) {
  Start(BatchingOptions());
  auto r = Request("short", 2, 4, 0);
  r->inputs[0].data = r->inputs[0].data.Slice(0, 4);  // 1 float for shape [2,4]
  Submit(std::move(r));
  ASSERT_TRUE(done_.Done("short"));
  EXPECT_EQ(done_.Get("short").status().code(), StatusCode::kInvalidArgument);
}

TEST_P(ServedModelTest, PriorityAboveTheLevelsIsInvalid) {
  auto options = BatchingOptions();
  options.queueing.priority_levels = 2;
  options.queueing.default_priority_level = 1;
  Start(options);
  auto r = Request("p", 1, 4, 0);
  r->priority = 3;
  Submit(std::move(r));
  ASSERT_TRUE(done_.Done("p"));
  EXPECT_EQ(done_.Get("p").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Outcome(RequestOutcome::kInvalidInput), 1u);
}

// ---- responses --------------------------------------------------------------------

TEST_P(ServedModelTest, RequestedOutputsComeInRequestedOrder) {
  Start(BatchingOptions());
  auto r = Request("r", 1, 2, 5);
  r->requested_outputs = {{"OUTPUT1", true}, {"OUTPUT0", false}};
  Submit(std::move(r));
  auto bad = Request("bad", 1, 2, 5);
  bad->requested_outputs = {{"NOPE", false}};
  Submit(std::move(bad));

  auto result = done_.Get("r");
  ASSERT_TRUE(result.ok()) << result.status().message();
  const auto& response = result.value();
  ASSERT_EQ(response.outputs.size(), 2u);
  ASSERT_EQ(response.requested.size(), 2u);
  EXPECT_EQ(response.outputs[0].name, "OUTPUT1");
  EXPECT_EQ(Floats(response.outputs[0]), (std::vector<float>{10, 12}));
  EXPECT_TRUE(response.requested[0].binary_data);
  EXPECT_EQ(response.outputs[1].name, "OUTPUT0");
  EXPECT_EQ(Floats(response.outputs[1]), (std::vector<float>{6, 7}));
  EXPECT_FALSE(response.requested[1].binary_data);
  EXPECT_EQ(done_.Get("bad").status().code(), StatusCode::kInvalidArgument);
}

// ---- statistics -------------------------------------------------------------------

// The memory budget's view (repository/MemoryBudget.h): a request counts in
// flight from Infer until it is answered, a refused one too, and its arrival
// is the model's last use.
TEST_P(ServedModelTest, InFlightCountsRequestsUntilAnsweredAndLastUseIsTheLatestArrival) {
  Start(BatchingOptions());
  EXPECT_EQ(served_->InFlight(), 0u);
  model_->Hold();
  auto held = Request("held", 1, 4, 0);
  const Clock::time_point arrival = held->arrival_time;
  Submit(std::move(held));
  ASSERT_TRUE(model_->WaitForRuns(1));
  EXPECT_EQ(served_->InFlight(), 1u);  // running
  EXPECT_EQ(served_->LastUsedNs(), arrival.time_since_epoch().count());
  Submit(Request("refused", 9, 4, 0));  // over max_batch_size: answered at once
  ASSERT_TRUE(done_.Done("refused"));
  EXPECT_EQ(served_->InFlight(), 1u);
  model_->Release(1);
  ExpectAddOne("held", 1, 4, 0);
  EXPECT_EQ(served_->InFlight(), 0u);
}

// A shadow run (ShadowComparison's TryShadow) counts in flight like a
// client's request, and only while it runs.
TEST_P(ServedModelTest, ShadowRunsCountInFlightUntilAnswered) {
  Start(BatchingOptions());
  model_->Hold();
  auto shadow = Request("shadow", 1, 4, 0);
  ASSERT_TRUE(served_->TryShadow(shadow));
  ASSERT_TRUE(model_->WaitForRuns(1));
  EXPECT_EQ(served_->InFlight(), 1u);
  auto refused = Request("refused", 9, 4, 0);  // over max_batch_size: answered at once
  ASSERT_TRUE(served_->TryShadow(refused));
  ASSERT_TRUE(done_.Done("refused"));
  EXPECT_EQ(served_->InFlight(), 1u);
  model_->Release(1);
  ExpectAddOne("shadow", 1, 4, 0);
  EXPECT_EQ(served_->InFlight(), 0u);
}

TEST_P(ServedModelTest, StatisticsFollowTriton) {
  Start(BatchingOptions());
  model_->AdvanceDuringRun(clock_.get(), 7us);  // the only time that passes
  Submit(Request("a", 2, 4, 10));
  ExpectAddOne("a", 2, 4, 10);
  Submit(Request("b", 1, 4, 20));
  ExpectAddOne("b", 1, 4, 20);
  Submit(Request("c", 9, 4, 0));  // rejected: over max_batch_size
  EXPECT_FALSE(done_.Get("c").ok());

  EXPECT_EQ(stats_->success.count.load(), 2u);
  EXPECT_EQ(stats_->success.ns.load(), 14'000u);
  EXPECT_EQ(stats_->fail.count.load(), 1u);
  EXPECT_EQ(stats_->queue.count.load(), 2u);
  EXPECT_EQ(stats_->queue.ns.load(), 0u);
  EXPECT_EQ(stats_->compute_input.count.load(), 2u);
  EXPECT_EQ(stats_->compute_infer.count.load(), 2u);
  EXPECT_EQ(stats_->compute_infer.ns.load(), 14'000u);
  EXPECT_EQ(stats_->compute_output.count.load(), 2u);
  EXPECT_EQ(stats_->inference_count.load(), 3u);
  EXPECT_EQ(stats_->execution_count.load(), 2u);
  EXPECT_GT(stats_->last_inference_ms.load(), 0u);
  EXPECT_EQ(stats_->BatchStatAt(2).compute_infer.count.load(), 1u);
  EXPECT_EQ(stats_->BatchStatAt(2).compute_infer.ns.load(), 7'000u);
  EXPECT_EQ(stats_->BatchStatAt(1).compute_infer.count.load(), 1u);
  EXPECT_EQ(stats_->BatchStatAt(3).compute_infer.count.load(), 0u);
  EXPECT_EQ(stats_->cache_hit.count.load(), 0u);
}

}  // namespace
}  // namespace ortserve

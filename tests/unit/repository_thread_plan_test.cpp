// The thread plan (repository/ThreadPlan.h): intra-op threads per instance
// within the budget, the shared ORT pool, and a model's own pools.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/RuntimeConfig.h"
#include "repository/ThreadPlan.h"

#include "ParsedConfig.h"

namespace ortserve {
namespace {

TEST(ThreadPlan, SplitsBudgetOverTheInstancesOfEachModel) {
  auto plan = ThreadPlan::Compute(16, {{"a:1", 2, 0, 1, false, false, ""}, {"b:1", 4, 0, 1, false, false, ""}}, /*shared_pool=*/false);
  ASSERT_EQ(plan.entries.size(), 2u);
  EXPECT_EQ(plan.entries[0].intra, 8);
  EXPECT_EQ(plan.entries[1].intra, 4);
  EXPECT_EQ(plan.total_threads, 32);
  EXPECT_TRUE(plan.oversubscribed);  // threads exist; compute slots cap what runs
  EXPECT_EQ(plan.Describe().size(), 3u);
}

TEST(ThreadPlan, RoundsDownAndNeverBelowOne) {
  auto plan = ThreadPlan::Compute(7, {{"a:1", 3, 0, 1, false, false, ""}}, /*shared_pool=*/false);
  EXPECT_EQ(plan.entries[0].intra, 2);
  EXPECT_EQ(plan.total_threads, 6);
  plan = ThreadPlan::Compute(2, {{"a:1", 3, 0, 1, false, false, ""}}, /*shared_pool=*/false);
  EXPECT_EQ(plan.entries[0].intra, 1);
  EXPECT_TRUE(plan.oversubscribed);
  plan = ThreadPlan::Compute(0, {{"a:1", 1, 0, 1, false, false, ""}}, /*shared_pool=*/false);
  EXPECT_EQ(plan.budget, 1);
  EXPECT_EQ(plan.entries[0].intra, 1);
}

TEST(ThreadPlan, ExplicitThreadsAreKept) {
  auto plan = ThreadPlan::Compute(8, {{"a:1", 1, 4, 1, false, false, ""}, {"b:1", 2, 0, 1, false, false, ""}}, /*shared_pool=*/false);
  EXPECT_EQ(plan.entries[0].intra, 4);
  EXPECT_TRUE(plan.entries[0].explicit_intra);
  EXPECT_EQ(plan.entries[1].intra, 4);
  EXPECT_EQ(plan.total_threads, 12);
}

TEST(ThreadPlan, ExplicitOversubscriptionIsFlagged) {
  auto plan = ThreadPlan::Compute(4, {{"a:1", 2, 4, 1, false, false, ""}, {"b:1", 1, 0, 1, false, false, ""}}, /*shared_pool=*/false);
  EXPECT_EQ(plan.entries[0].total_threads, 8);
  EXPECT_EQ(plan.entries[1].intra, 4);
  EXPECT_EQ(plan.total_threads, 12);
  EXPECT_TRUE(plan.oversubscribed);
  // The total line says that compute slots cap what runs at once.
  EXPECT_NE(plan.Describe().back().find("at most 4 compute at once"), std::string::npos);
}

TEST(ThreadPlan, ParallelModeCountsInterThreads) {
  auto plan = ThreadPlan::Compute(8, {{"a:1", 2, 2, 2, true, true, ""}}, /*shared_pool=*/false);
  EXPECT_EQ(plan.entries[0].total_threads, 8);
  EXPECT_TRUE(plan.entries[0].allow_spinning);
  EXPECT_NE(plan.Describe()[0].find("spinning on"), std::string::npos);
}

TEST(ThreadPlan, SharedPoolThreadsDoNotGrowWithModels) {
  std::vector<ThreadPlanRequest> requests;
  for (int i = 0; i < 50; ++i) requests.push_back({"m" + std::to_string(i) + ":1", 2, 0, 1, false, false, ""});
  auto plan = ThreadPlan::Compute(4, requests, /*shared_pool=*/true);
  EXPECT_EQ(plan.shared_pool_threads, 3);  // the calling thread is the 4th
  EXPECT_EQ(plan.ort_threads, 3);
  for (const auto& e : plan.entries) {
    EXPECT_TRUE(e.shared_pool);
    EXPECT_EQ(e.run_threads, 2);  // budget / instances of the model: the slots a run leases
    EXPECT_EQ(e.ort_threads, 0);
  }
  EXPECT_NE(plan.Describe().back().find("total: 3 ORT thread(s) exist"), std::string::npos);
}

TEST(ThreadPlan, ARunOfOneThreadComputesOnTheCallerAlone) {
  // 4 instances on a budget of 2: one thread per run, on the run-<model>
  // thread, not queued for the shared pool's thread.
  auto plan = ThreadPlan::Compute(2, {{"a:1", 4, 0, 1, false, false, ""}, {"b:1", 1, 0, 1, false, false, ""}},
                                  /*shared_pool=*/true);
  EXPECT_FALSE(plan.entries[0].shared_pool);
  EXPECT_EQ(plan.entries[0].run_threads, 1);
  EXPECT_EQ(plan.entries[0].ort_threads, 0);
  EXPECT_TRUE(plan.entries[1].shared_pool);
  EXPECT_EQ(plan.ort_threads, 1);  // the shared pool's thread only
  EXPECT_NE(plan.Describe()[0].find("1 thread per run: the run-<model> thread alone"), std::string::npos);
}

TEST(ThreadPlan, AModelThatAsksKeepsItsOwnPools) {
  ThreadPlanRequest own{"own:1", 2, 3, 1, false, false, ""};
  own.own_pool_reason = "intra_op_thread_count";
  auto plan = ThreadPlan::Compute(4, {own, {"b:1", 1, 0, 1, false, false, ""}}, /*shared_pool=*/true);
  EXPECT_FALSE(plan.entries[0].shared_pool);
  EXPECT_EQ(plan.entries[0].ort_threads, 2 * 2);  // per instance: 3 intra-op threads, the caller included
  EXPECT_TRUE(plan.entries[1].shared_pool);
  EXPECT_EQ(plan.ort_threads, 3 + 4);
  EXPECT_NE(plan.Describe()[0].find("own pools: 4 ORT thread(s)"), std::string::npos);
}

TEST(ThreadPlan, PerSessionPoolsCountEveryInstance) {
  auto plan = ThreadPlan::Compute(3, {{"a:1", 1, 0, 1, false, false, ""}, {"b:1", 1, 0, 1, false, false, ""}},
                                  /*shared_pool=*/false);
  EXPECT_EQ(plan.shared_pool_threads, 0);
  EXPECT_EQ(plan.ort_threads, 2 * 2);
}

TEST(SessionSettings, ThreadPoolParameter) {
  auto own = ReadSessionSettings(Parse(R"(parameters { key: "ort_thread_pool" value { string_value: "own" } })"));
  ASSERT_TRUE(own.ok());
  EXPECT_TRUE(own->own_thread_pool);
  auto bad = ReadSessionSettings(Parse(R"(parameters { key: "ort_thread_pool" value { string_value: "x" } })"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ort_thread_pool"), std::string::npos);
}

}  // namespace
}  // namespace ortserve

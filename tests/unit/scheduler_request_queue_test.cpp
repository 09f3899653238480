#include <gtest/gtest.h>

#include "scheduler/RequestQueue.h"

namespace ortserve {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<InferenceRequest> Req(const std::string& id, uint64_t timeout_us = 0) {
  auto r = std::make_unique<InferenceRequest>();
  r->id = id;
  r->timeout_us = timeout_us;
  return r;
}

std::vector<std::string> Order(RequestQueue& q) {
  std::vector<std::string> ids;
  q.Scan([&](QueuedRequest& e) {
    ids.push_back(e.request->id);
    return true;
  });
  return ids;
}

const Clock::time_point kT0 = Clock::time_point{} + 1h;

TEST(RequestQueue, ScansLevelsInPriorityOrderThenFifo) {
  RequestQueue q("model 'm' version '1'", {QueuePolicy{}, QueuePolicy{}}, 10);
  for (auto [id, level] : {std::pair{"a2", 2u}, {"b1", 1u}, {"c2", 2u}, {"d1", 1u}}) {
    auto r = Req(id);
    ASSERT_TRUE(q.Push(r, level, 1, kT0).ok());
    EXPECT_EQ(r, nullptr);  // ownership moved
  }
  EXPECT_EQ(Order(q), (std::vector<std::string>{"b1", "d1", "a2", "c2"}));
  EXPECT_EQ(q.size(), 4u);
}

TEST(RequestQueue, EachLevelHasItsOwnBoundAndKeepsTheRequestWhenFull) {
  QueuePolicy small;
  small.max_queue_size = 1;
  RequestQueue q("model 'm' version '1'", {small, QueuePolicy{}}, 2);
  auto a = Req("a"), b = Req("b"), c = Req("c"), d = Req("d"), e = Req("e");
  ASSERT_TRUE(q.Push(a, 1, 1, kT0).ok());
  Status full = q.Push(b, 1, 1, kT0);
  EXPECT_EQ(full.code(), StatusCode::kUnavailable);
  EXPECT_EQ(full.message(), "model 'm' version '1' queue is full (max_queue_size 1)");
  ASSERT_NE(b, nullptr);  // still the caller's
  EXPECT_TRUE(q.Push(c, 2, 1, kT0).ok());
  EXPECT_TRUE(q.Push(d, 2, 1, kT0).ok());
  EXPECT_NE(q.Push(e, 2, 1, kT0).message().find("max_queue_size 2"), std::string::npos);
}

TEST(RequestQueue, RequestTimeoutMayShortenButNotLengthenTheDefault) {
  QueuePolicy policy;
  policy.default_timeout_us = 1000;
  RequestQueue q("m", {policy}, 10);
  auto shorter = Req("shorter", 10), longer = Req("longer", 5000), none = Req("none");
  ASSERT_TRUE(q.Push(shorter, 1, 1, kT0).ok());
  ASSERT_TRUE(q.Push(longer, 1, 1, kT0).ok());
  ASSERT_TRUE(q.Push(none, 1, 1, kT0).ok());
  std::vector<RejectedRequest> rejected;
  EXPECT_EQ(q.ApplyPolicies(kT0 + 20us, &rejected), kT0 + 1000us);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].request->id, "shorter");
  EXPECT_EQ(rejected[0].status.code(), StatusCode::kUnavailable);
  rejected.clear();
  EXPECT_EQ(q.ApplyPolicies(kT0 + 1000us, &rejected), Clock::time_point::max());
  EXPECT_EQ(rejected.size(), 2u);
  EXPECT_TRUE(q.empty());
}

TEST(RequestQueue, OverrideCanBeDisallowed) {
  QueuePolicy policy;
  policy.allow_timeout_override = false;
  RequestQueue q("m", {policy}, 10);
  auto r = Req("r", 10);
  ASSERT_TRUE(q.Push(r, 1, 1, kT0).ok());
  std::vector<RejectedRequest> rejected;
  EXPECT_EQ(q.ApplyPolicies(kT0 + 1h, &rejected), Clock::time_point::max());
  EXPECT_TRUE(rejected.empty());
}

TEST(RequestQueue, DelayActionMovesExpiredBehindItsLevel) {
  QueuePolicy delay;
  delay.timeout_action = QueuePolicy::TimeoutAction::kDelay;
  RequestQueue q("m", {delay, QueuePolicy{}}, 10);
  auto late = Req("late", 5), other = Req("other"), low = Req("low");
  ASSERT_TRUE(q.Push(late, 1, 1, kT0).ok());
  ASSERT_TRUE(q.Push(other, 1, 1, kT0).ok());
  ASSERT_TRUE(q.Push(low, 2, 1, kT0).ok());
  std::vector<RejectedRequest> rejected;
  q.ApplyPolicies(kT0 + 10us, &rejected);
  EXPECT_TRUE(rejected.empty());
  EXPECT_EQ(Order(q), (std::vector<std::string>{"other", "late", "low"}));
  EXPECT_EQ(q.size(), 3u);
}

TEST(RequestQueue, CancelledRequestsAreTakenOut) {
  RequestQueue q("model 'm' version '1'", {QueuePolicy{}}, 10);
  auto a = Req("a"), b = Req("b");
  a->cancelled = std::make_shared<CancelToken>();
  a->cancelled->Cancel();
  ASSERT_TRUE(q.Push(a, 1, 1, kT0).ok());
  ASSERT_TRUE(q.Push(b, 1, 1, kT0).ok());
  std::vector<RejectedRequest> rejected;
  q.ApplyPolicies(kT0, &rejected);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].status.code(), StatusCode::kCancelled);
  EXPECT_EQ(Order(q), (std::vector<std::string>{"b"}));
}

TEST(RequestQueue, TakeRemovesExactlyTheChosenEntriesInTheChosenOrder) {
  RequestQueue q("m", {QueuePolicy{}, QueuePolicy{}}, 10);
  for (auto [id, level] : {std::pair{"a", 1u}, {"b", 1u}, {"c", 2u}, {"d", 2u}}) {
    auto r = Req(id);
    ASSERT_TRUE(q.Push(r, level, 1, kT0).ok());
  }
  std::vector<QueuedRequest*> chosen;
  q.Scan([&](QueuedRequest& e) {
    if (e.request->id == "d" || e.request->id == "a") chosen.insert(chosen.begin(), &e);
    return true;
  });
  auto taken = q.Take(chosen);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].request->id, "d");
  EXPECT_EQ(taken[1].request->id, "a");
  EXPECT_EQ(Order(q), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(q.size(), 2u);
}

}  // namespace
}  // namespace ortserve

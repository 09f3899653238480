// Client quotas on a fake clock: the token bucket's refill and burst, the
// concurrency slots a ticket holds, which limit applies to whom, Retry-After,
// reloads, the rejection counts, and that idle client states are dropped.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "server/common/ClientQuotas.h"

namespace ortserve::common {
namespace {

using std::chrono::milliseconds;

QuotaConfig Config(std::string_view json) {
  auto parsed = QuotaConfig::Parse(json, "test.json");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return std::move(parsed).value();
}

class ClientQuotasTest : public ::testing::Test {
 protected:
  QuotaClock::time_point now = QuotaClock::time_point() + std::chrono::hours(1);
  ClientQuotas::NowFn clock() {
    return [this] { return now; };
  }
  static bool Admitted(const std::variant<QuotaTicket, QuotaRejection>& r) {
    return std::holds_alternative<QuotaTicket>(r);
  }
};

TEST(TokenBucketTest, StartsFullRefillsAtTheRateAndCapsAtTheBurst) {
  QuotaLimit limit{.rate = 2.0, .burst = 3, .max_in_flight = std::nullopt};
  TokenBucket bucket;
  auto t = QuotaClock::time_point() + std::chrono::seconds(10);
  bucket.Advance(limit, t);
  EXPECT_DOUBLE_EQ(bucket.tokens(), 3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(bucket.HasToken());
    bucket.Take();
  }
  EXPECT_FALSE(bucket.HasToken());
  EXPECT_DOUBLE_EQ(bucket.SecondsUntilToken(limit), 0.5);
  bucket.Advance(limit, t + milliseconds(250));
  EXPECT_FALSE(bucket.HasToken());
  bucket.Advance(limit, t + milliseconds(500));
  EXPECT_TRUE(bucket.HasToken());
  bucket.Advance(limit, t + std::chrono::seconds(60));
  EXPECT_DOUBLE_EQ(bucket.tokens(), 3);
  EXPECT_EQ(bucket.FullAt(limit), t + std::chrono::seconds(60));
}

TEST_F(ClientQuotasTest, RateAdmitsBurstThenOnePerIntervalWithRetryAfterRoundedUp) {
  ClientQuotas quotas(Config(R"({"default": {"rate": 0.4, "burst": 2}})"), clock());
  EXPECT_TRUE(Admitted(quotas.Acquire("a", "m")));
  EXPECT_TRUE(Admitted(quotas.Acquire("a", "m")));
  auto refused = quotas.Acquire("a", "m");
  ASSERT_FALSE(Admitted(refused));
  // One token takes 2.5 s at 0.4/s: Retry-After 3.
  EXPECT_EQ(std::get<QuotaRejection>(refused).retry_after_s, 3u);
  EXPECT_NE(std::get<QuotaRejection>(refused).message.find("0.4 requests/s"), std::string::npos);
  // Another client has its own bucket.
  EXPECT_TRUE(Admitted(quotas.Acquire("b", "m")));
  now += milliseconds(2500);
  EXPECT_TRUE(Admitted(quotas.Acquire("a", "m")));
  EXPECT_FALSE(Admitted(quotas.Acquire("a", "m")));
}

TEST_F(ClientQuotasTest, RefusalsPauseUntilTheNextTokenWithinTheBoundsStretchedUpToTwice) {
  using std::chrono::microseconds;
  const auto expect_pause = [](const std::variant<QuotaTicket, QuotaRejection>& refused, microseconds base) {
    ASSERT_TRUE(std::holds_alternative<QuotaRejection>(refused));
    const microseconds pause = std::get<QuotaRejection>(refused).pause;
    EXPECT_GE(pause, base);
    EXPECT_LT(pause, 2 * base);
  };
  ClientQuotas quotas(Config(R"({"clients": {"fast": {"rate": 20, "burst": 1}, "slow": {"rate": 0.001, "burst": 1},
                                 "busy": {"max_in_flight": 1}}})"),
                      clock());
  ASSERT_TRUE(Admitted(quotas.Acquire("fast", "m")));
  expect_pause(quotas.Acquire("fast", "m"), microseconds(50'000));  // a token in 50 ms
  now += milliseconds(45);
  expect_pause(quotas.Acquire("fast", "m"), QuotaRejection::kMinQuotaPause);  // in 5 ms: the floor
  ASSERT_TRUE(Admitted(quotas.Acquire("slow", "m")));
  auto slow = quotas.Acquire("slow", "m");  // a token in 1000 s, Retry-After says so
  expect_pause(slow, QuotaRejection::kMaxQuotaPause);
  EXPECT_EQ(std::get<QuotaRejection>(slow).retry_after_s, 1000u);
  auto held = quotas.Acquire("busy", "m");
  ASSERT_TRUE(Admitted(held));
  auto busy = quotas.Acquire("busy", "m");  // its request in flight may end any time
  expect_pause(busy, QuotaRejection::kMinQuotaPause);
  EXPECT_EQ(std::get<QuotaRejection>(busy).retry_after_s, 1u);
  // Refusals waiting for one token do not all come back at once.
  std::set<microseconds> pauses;
  for (int i = 0; i < 20; ++i) pauses.insert(std::get<QuotaRejection>(quotas.Acquire("slow", "m")).pause);
  EXPECT_GT(pauses.size(), 10u);
}

TEST_F(ClientQuotasTest, InFlightSlotsAreHeldByTheTicket) {
  ClientQuotas quotas(Config(R"({"default": {"max_in_flight": 2}})"), clock());
  auto first = quotas.Acquire("a", "m");
  auto second = quotas.Acquire("a", "m");
  ASSERT_TRUE(Admitted(first) && Admitted(second));
  auto third = quotas.Acquire("a", "m");
  ASSERT_FALSE(Admitted(third));
  EXPECT_EQ(std::get<QuotaRejection>(third).retry_after_s, 1u);
  std::get<QuotaTicket>(first).Release();
  EXPECT_TRUE(Admitted(quotas.Acquire("a", "m")));  // released again at once (a temporary)
  {
    auto moved = std::move(std::get<QuotaTicket>(second));
  }
  auto a = quotas.Acquire("a", "m");
  auto b = quotas.Acquire("a", "m");
  EXPECT_TRUE(Admitted(a) && Admitted(b));
  EXPECT_FALSE(Admitted(quotas.Acquire("a", "m")));
}

TEST_F(ClientQuotasTest, NamedClientsReplaceTheDefaultAndModelLimitsApplyPerClient) {
  ClientQuotas quotas(Config(R"({
      "default": {"rate": 1, "burst": 1},
      "models": {"m": {"max_in_flight": 1}},
      "clients": {"gold": {"rate": 100, "burst": 3, "models": {"m": {"rate": 1, "burst": 2}}}}})"),
                      clock());
  // gold: its own client limit (burst 3) but its model limit for m (burst 2).
  EXPECT_TRUE(Admitted(quotas.Acquire("gold", "m")));
  EXPECT_TRUE(Admitted(quotas.Acquire("gold", "m")));
  EXPECT_FALSE(Admitted(quotas.Acquire("gold", "m")));
  EXPECT_TRUE(Admitted(quotas.Acquire("gold", "other-model")));
  // Anyone else: the default, and the top-level model limit, per client.
  auto held = quotas.Acquire("x", "m");
  ASSERT_TRUE(Admitted(held));
  EXPECT_TRUE(Admitted(quotas.Acquire("y", "m")));
  now += std::chrono::seconds(5);
  auto refused = quotas.Acquire("x", "m");  // a token again, but its slot for m is held
  ASSERT_FALSE(Admitted(refused));
  EXPECT_NE(std::get<QuotaRejection>(refused).message.find("in flight"), std::string::npos);

  // Named clients are their own label; everyone else is "other".
  auto rejected = quotas.Rejected();
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_EQ(rejected[0].client, "gold");
  EXPECT_EQ(rejected[0].model, "m");
  EXPECT_EQ(rejected[1].client, "other");
  EXPECT_EQ(rejected[1].count, 1u);
}

TEST_F(ClientQuotasTest, ReloadChangesTheLimitAndKeepsTheBuckets) {
  ClientQuotas quotas(Config(R"({"default": {"rate": 1, "burst": 1}})"), clock());
  EXPECT_TRUE(Admitted(quotas.Acquire("a", "m")));
  EXPECT_FALSE(Admitted(quotas.Acquire("a", "m")));
  quotas.Reload(Config(R"({"default": {"rate": 10, "burst": 5}})"));
  EXPECT_FALSE(Admitted(quotas.Acquire("a", "m")));  // still empty: no free refill on reload
  now += milliseconds(100);
  EXPECT_TRUE(Admitted(quotas.Acquire("a", "m")));
  quotas.Reload(Config(R"({})"));
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(Admitted(quotas.Acquire("a", "m")));
}

TEST_F(ClientQuotasTest, IdleClientsExpireAndTheTrackedCountStaysBounded) {
  ClientQuotas quotas(Config(R"({"default": {"rate": 1, "burst": 2}, "max_tracked_clients": 1600})"), clock());
  // Clients whose buckets are full again are dropped (a new state equals them).
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(Admitted(quotas.Acquire("c" + std::to_string(i), "m")));
  EXPECT_GE(quotas.TrackedClients(), 1000u);
  now += std::chrono::seconds(2);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(Admitted(quotas.Acquire("d" + std::to_string(i), "m")));
  // 100k ids inside one refill interval: bounded by max_tracked_clients.
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(Admitted(quotas.Acquire("e" + std::to_string(i), "m")));
  EXPECT_LE(quotas.TrackedClients(), 1600u);
  // A client with a request in flight keeps its state through every sweep.
  ClientQuotas held_quotas(Config(R"({"default": {"max_in_flight": 1}, "max_tracked_clients": 16})"), clock());
  auto ticket = held_quotas.Acquire("holder", "m");
  ASSERT_TRUE(Admitted(ticket));
  for (int i = 0; i < 5000; ++i) held_quotas.Acquire("f" + std::to_string(i), "m");
  EXPECT_FALSE(Admitted(held_quotas.Acquire("holder", "m")));
}

TEST(QuotaConfigTest, BadFilesNameTheKey) {
  const auto message = [](std::string_view json) {
    auto parsed = QuotaConfig::Parse(json, "q.json");
    return parsed.ok() ? std::string("ok") : parsed.status().message();
  };
  EXPECT_EQ(message(R"({"default": {"rate": 0}})"), "client quota config q.json: default.rate: must be a number > 0");
  EXPECT_EQ(message(R"({"clients": {"a": {"burst": 2}}})"), "client quota config q.json: clients.a.burst: needs a rate");
  EXPECT_EQ(message(R"({"models": {"m": {"max_in_flight": 1.5}}})"),
            "client quota config q.json: models.m.max_in_flight: must be an integer >= 1");
  EXPECT_NE(message(R"({"defaults": {}})").find("defaults: unknown key"), std::string::npos);
  EXPECT_NE(message(R"({"default": {"models": {}}})").find("default.models: unknown key"), std::string::npos);
  EXPECT_NE(message("[1]").find("is not a JSON object"), std::string::npos);
  EXPECT_EQ(message(R"({"default": {"rate": 2.5}})"), "ok");
  auto config = QuotaConfig::Parse(R"({"default": {"rate": 2.5}})", "q.json");
  EXPECT_DOUBLE_EQ(config->ClientLimit("x").burst, 3);  // the rate rounded up
}

}  // namespace
}  // namespace ortserve::common

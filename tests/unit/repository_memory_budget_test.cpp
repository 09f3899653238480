// The memory budget's eviction policy (PlanEviction): least recently used
// idle models first, only as many as the load needs, every never-evict rule
// (requests, open sequences, pinned, composing model of an ensemble in use,
// part of the load), and the text that names the budget and its holders
// when nothing can go. Also the byte sizes of --model-memory-budget.
#include "repository/MemoryBudget.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ortserve {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

ResidentModel Idle(const std::string& name, uint64_t mib, int64_t last_used) {
  ResidentModel m;
  m.name = name;
  m.bytes = mib * kMiB;
  m.last_used_ns = last_used;
  return m;
}

std::vector<std::string> Plan(uint64_t budget_mib, uint64_t need_mib, const std::vector<ResidentModel>& resident) {
  auto plan = PlanEviction(budget_mib * kMiB, "new", need_mib * kMiB, resident);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? plan.value() : std::vector<std::string>{};
}

TEST(MemoryBudget, NothingIsEvictedWhileTheLoadFits) {
  EXPECT_TRUE(Plan(64, 20, {Idle("a", 20, 1), Idle("b", 20, 2)}).empty());
  EXPECT_TRUE(Plan(60, 20, {Idle("a", 20, 1), Idle("b", 20, 2)}).empty());  // exactly full
}

TEST(MemoryBudget, NoBudgetNeverEvicts) {
  EXPECT_TRUE(Plan(0, 1000, {Idle("a", 20, 1)}).empty());
}

TEST(MemoryBudget, LeastRecentlyUsedGoFirstAndOnlyAsManyAsNeeded) {
  const std::vector<ResidentModel> resident = {Idle("a", 20, 30), Idle("b", 20, 10), Idle("c", 20, 20)};
  EXPECT_EQ(Plan(64, 20, resident), std::vector<std::string>{"b"});
  EXPECT_EQ(Plan(64, 40, resident), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(Plan(64, 64, resident), (std::vector<std::string>{"b", "c", "a"}));
}

TEST(MemoryBudget, EqualLastUseGoesByName) {
  EXPECT_EQ(Plan(40, 20, {Idle("z", 20, 5), Idle("y", 20, 5)}), std::vector<std::string>{"y"});
}

TEST(MemoryBudget, EveryHoldKeepsItsModel) {
  std::vector<ResidentModel> resident;
  ResidentModel busy = Idle("busy", 10, 1);
  busy.requests = 3;
  ResidentModel sequence = Idle("sequence", 10, 2);
  sequence.open_sequences = 1;
  ResidentModel pinned = Idle("pinned", 10, 3);
  pinned.pinned = true;
  ResidentModel step = Idle("step", 10, 4);
  step.ensemble_in_use = "pipeline";
  ResidentModel loading = Idle("loading", 10, 5);
  loading.loading = true;
  resident = {busy, sequence, pinned, step, loading, Idle("idle", 10, 100)};
  // The only idle one goes, although it is the most recently used.
  EXPECT_EQ(Plan(64, 10, resident), std::vector<std::string>{"idle"});
}

TEST(MemoryBudget, NothingEvictableNamesTheBudgetAndWhatHoldsIt) {
  ResidentModel a = Idle("a", 20, 1);
  a.requests = 3;
  ResidentModel b = Idle("b", 20, 2);
  b.pinned = true;
  ResidentModel c = Idle("c", 10, 3);
  c.open_sequences = 2;
  ResidentModel d = Idle("d", 10, 4);
  d.ensemble_in_use = "e";
  auto plan = PlanEviction(64 * kMiB, "new", 20 * kMiB, {a, b, c, d});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(plan.status().message(),
            "model memory budget 64 MiB exhausted: loading 'new' needs 20 MiB, 60 MiB held by a (20 MiB, 3 requests "
            "queued or running), b (20 MiB, pinned), c (10 MiB, 2 open sequences), d (10 MiB, composing model of "
            "ensemble 'e' in use)");
}

TEST(MemoryBudget, EvictingAllThatMayGoIsNotEnough) {
  ResidentModel a = Idle("a", 40, 1);
  a.pinned = true;
  // b could go, but 40 + 20 > 50 even then: nothing is evicted for nothing.
  auto plan = PlanEviction(50 * kMiB, "new", 20 * kMiB, {a, Idle("b", 5, 2)});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("held by a (40 MiB, pinned)"), std::string::npos)
      << plan.status().message();
}

TEST(MemoryBudget, ALoadLargerThanTheBudgetIsRefusedOutright) {
  auto plan = PlanEviction(64 * kMiB, "huge", 65 * kMiB, {Idle("a", 20, 1)});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "model memory budget 64 MiB exhausted: loading 'huge' needs 65 MiB, more than the whole budget");
}

TEST(MemoryBudget, HoldTexts) {
  ResidentModel m = Idle("m", 1, 1);
  EXPECT_EQ(EvictionHold(m), "");
  m.requests = 1;
  EXPECT_EQ(EvictionHold(m), "1 request queued or running");
}

TEST(MemoryBudget, ByteSizes) {
  EXPECT_EQ(ParseByteSize("0").value(), 0u);
  EXPECT_EQ(ParseByteSize("1234").value(), 1234u);
  EXPECT_EQ(ParseByteSize("64K").value(), 64u * 1024);
  EXPECT_EQ(ParseByteSize("64M").value(), 64 * kMiB);
  EXPECT_EQ(ParseByteSize("2G").value(), 2048 * kMiB);
  EXPECT_EQ(ParseByteSize("3MiB").value(), 3 * kMiB);
  EXPECT_EQ(ParseByteSize("5m").value(), 5 * kMiB);
  for (const char* bad : {"", "M", "-1", "1.5G", "12T", "1 G", "99999999999999999G"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
  EXPECT_EQ(FormatBytes(64 * kMiB), "64 MiB");
  EXPECT_EQ(FormatBytes(1536 * kMiB), "1.5 GiB");
  EXPECT_EQ(FormatBytes(512), "512 B");
}

}  // namespace
}  // namespace ortserve

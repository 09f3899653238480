// DetectCpuBudget on cgroup trees the test writes: cgroup v2 cpu.max (pure
// and hybrid mounts, nested limits), cgroup v1 cfs quota, affinity below the
// quota, and files that are absent or say "no limit".
#include "app/CpuBudget.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace ortserve::app {
namespace {

namespace fs = std::filesystem;

class CpuBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("ortserve_cpu_budget_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "sys");
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  CpuBudget Detect(int affinity) {
    return DetectCpuBudget({.cgroup_root = (root_ / "sys").string(),
                            .proc_self_cgroup = (root_ / "proc_self_cgroup").string(),
                            .affinity_cpus = affinity});
  }

  fs::path root_;
};

TEST(QuotaToCpusTest, RoundsDownAndNeverBelowOne) {
  EXPECT_EQ(QuotaToCpus(100000, 100000), 1);
  EXPECT_EQ(QuotaToCpus(150000, 100000), 1);
  EXPECT_EQ(QuotaToCpus(400000, 100000), 4);
  EXPECT_EQ(QuotaToCpus(50000, 100000), 1);
  EXPECT_EQ(QuotaToCpus(0, 100000), 1);
}

TEST_F(CpuBudgetTest, CgroupV2QuotaBelowAffinityWins) {
  Write("proc_self_cgroup", "0::/kubepods/pod1/ctr\n");
  Write("sys/cgroup.controllers", "cpu memory\n");
  Write("sys/kubepods/pod1/ctr/cpu.max", "200000 100000\n");
  const CpuBudget b = Detect(16);
  EXPECT_EQ(b.cpus, 2);
  EXPECT_NE(b.source.find("cgroup v2 cpu.max 200000 100000"), std::string::npos) << b.source;
  EXPECT_NE(b.source.find("kubepods/pod1/ctr"), std::string::npos) << b.source;
}

TEST_F(CpuBudgetTest, CgroupV2SmallestLimitOnThePathToTheRootWins) {
  Write("proc_self_cgroup", "0::/a/b\n");
  Write("sys/a/b/cpu.max", "max 100000\n");
  Write("sys/a/cpu.max", "300000 100000\n");
  EXPECT_EQ(Detect(8).cpus, 3);
}

TEST_F(CpuBudgetTest, CgroupV2HybridMountUnderUnified) {
  Write("proc_self_cgroup", "1:cpu:/\n0::/job\n");
  Write("sys/unified/cgroup.controllers", "");
  Write("sys/unified/job/cpu.max", "100000 100000\n");
  EXPECT_EQ(Detect(8).cpus, 1);
}

TEST_F(CpuBudgetTest, ContainerSeesItsOwnCgroupAtTheMount) {
  // /proc/self/cgroup names the host's path, which is not mounted inside.
  Write("proc_self_cgroup", "0::/system.slice/docker-abc.scope\n");
  Write("sys/cpu.max", "250000 100000\n");
  EXPECT_EQ(Detect(8).cpus, 2);
}

TEST_F(CpuBudgetTest, CgroupV1CfsQuota) {
  Write("proc_self_cgroup", "4:memory:/x\n3:cpu,cpuacct:/x\n");
  Write("sys/cpu,cpuacct/x/cpu.cfs_quota_us", "100000\n");
  Write("sys/cpu,cpuacct/x/cpu.cfs_period_us", "100000\n");
  const CpuBudget b = Detect(8);
  EXPECT_EQ(b.cpus, 1);
  EXPECT_NE(b.source.find("cgroup v1"), std::string::npos) << b.source;
}

TEST_F(CpuBudgetTest, CgroupV1UnlimitedQuotaFallsBackToAffinity) {
  Write("proc_self_cgroup", "3:cpu:/\n");
  Write("sys/cpu/cpu.cfs_quota_us", "-1\n");
  Write("sys/cpu/cpu.cfs_period_us", "100000\n");
  const CpuBudget b = Detect(6);
  EXPECT_EQ(b.cpus, 6);
  EXPECT_NE(b.source.find("affinity"), std::string::npos) << b.source;
  EXPECT_NE(b.source.find("no cgroup CPU quota"), std::string::npos) << b.source;
}

TEST_F(CpuBudgetTest, AffinityBelowTheQuotaWins) {
  Write("proc_self_cgroup", "0::/\n");
  Write("sys/cpu.max", "800000 100000\n");
  const CpuBudget b = Detect(2);
  EXPECT_EQ(b.cpus, 2);
  EXPECT_NE(b.source.find("quota allows 8"), std::string::npos) << b.source;
}

TEST_F(CpuBudgetTest, NoCgroupFilesMeansAffinity) {
  EXPECT_EQ(Detect(3).cpus, 3);  // no proc_self_cgroup at all
  Write("proc_self_cgroup", "0::/\n");
  Write("sys/cpu.max", "garbage\n");
  EXPECT_EQ(Detect(3).cpus, 3);
}

TEST(CpuBudgetRealTest, ThisProcessGetsAtLeastOneCpu) {
  const CpuBudget b = DetectCpuBudget();
  EXPECT_GE(b.cpus, 1);
  EXPECT_FALSE(b.source.empty());
}

}  // namespace
}  // namespace ortserve::app

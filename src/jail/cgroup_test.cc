#include "jail/cgroup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "sys/files.h"

namespace hutch::jail {
namespace {

namespace fs = std::filesystem;

// This host (Docker on a v1 host): one hierarchy per controller, cpu and cpuacct apart, a
// controller-less cgroup2 at /sys/fs/cgroup/unified.
constexpr std::string_view kV1Cgroup =
    "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n"
    "4:memory:/process_api/7b50\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";
constexpr std::string_view kV1Mountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(CgroupParseTest, ProcSelfCgroup) {
  auto entries = parseProcCgroup(kV1Cgroup);
  ASSERT_TRUE(entries) << entries.error().describe();
  ASSERT_EQ(entries->size(), 10U);
  EXPECT_EQ((*entries)[0], (ProcCgroup{9, {}, "/"}));
  EXPECT_EQ((*entries)[5], (ProcCgroup{4, {"memory"}, "/process_api/7b50"}));
  EXPECT_EQ((*entries)[9], (ProcCgroup{0, {}, "/"}));
  auto comounted = parseProcCgroup("3:cpu,cpuacct:/system.slice/hutchd.service\n");
  ASSERT_TRUE(comounted);
  EXPECT_EQ((*comounted)[0].controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
  EXPECT_FALSE(parseProcCgroup("garbage\n"));
  EXPECT_FALSE(parseProcCgroup("1:memory:relative\n"));
}

TEST(CgroupParseTest, Mountinfo) {
  auto mounts = parseCgroupMounts(kV1Mountinfo);
  ASSERT_EQ(mounts.size(), 9U);  // the tmpfs is not a cgroup
  EXPECT_EQ(mounts[0], (CgroupMount{CgroupVersion::kV1, "/sys/fs/cgroup/cpu", "/", {"cpu"}}));
  EXPECT_EQ(mounts[7].controllers, std::vector<std::string>{});  // name=systemd
  EXPECT_EQ(mounts[8], (CgroupMount{CgroupVersion::kV2, "/sys/fs/cgroup/unified", "/", {}}));
  // Optional fields before the separator, and octal escapes in paths.
  auto odd = parseCgroupMounts(
      "30 24 0:26 /a\\040b /sys/fs/cgroup rw,nosuid shared:4 master:1 - cgroup2 cgroup2 "
      "rw,nsdelegate\n");
  ASSERT_EQ(odd.size(), 1U);
  EXPECT_EQ(odd[0].root, "/a b");
  EXPECT_EQ(odd[0].version, CgroupVersion::kV2);
}

TEST(CgroupHostTest, V1BoxesGoBelowTheDaemonInEachHierarchy) {
  auto host = CgroupHost::fromText(kV1Cgroup, kV1Mountinfo);
  ASSERT_TRUE(host) << host.error().describe();
  EXPECT_EQ(host->version(), CgroupVersion::kV1);
  EXPECT_EQ(host->baseDirs(),
            (std::vector<CgroupDir>{{"memory", "/sys/fs/cgroup/memory/process_api/7b50"},
                                    {"cpu", "/sys/fs/cgroup/cpu"},
                                    {"cpuacct", "/sys/fs/cgroup/cpuacct"},
                                    {"pids", "/sys/fs/cgroup/pids"},
                                    {"blkio", "/sys/fs/cgroup/blkio"}}));
  auto box = host->boxCgroup("box-1");
  ASSERT_TRUE(box);
  EXPECT_EQ(box->version, CgroupVersion::kV1);
  EXPECT_EQ(*box->dirFor("memory"), "/sys/fs/cgroup/memory/process_api/7b50/hutch-boxes/box-1");
  EXPECT_EQ(*box->dirFor("cpu"), "/sys/fs/cgroup/cpu/hutch-boxes/box-1");
  EXPECT_EQ(*box->dirFor("io"), "/sys/fs/cgroup/blkio/hutch-boxes/box-1");
  EXPECT_FALSE(box->dirFor("freezer"));
}

TEST(CgroupHostTest, V1ComountedCpuAndANonRootMount) {
  std::string_view cgroup =
      "5:cpu,cpuacct:/system.slice/hutchd.service\n"
      "4:memory:/system.slice/hutchd.service\n"
      "2:pids:/system.slice/hutchd.service\n0::/system.slice/hutchd.service\n";
  // memory is mounted from a subtree (as inside some containers).
  std::string_view mountinfo =
      "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "35 31 0:32 /system.slice /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
  auto host = CgroupHost::fromText(cgroup, mountinfo);
  ASSERT_TRUE(host) << host.error().describe();
  EXPECT_EQ(host->baseDirs(),
            (std::vector<CgroupDir>{
                {"memory", "/sys/fs/cgroup/memory/hutchd.service"},
                {"cpu,cpuacct", "/sys/fs/cgroup/cpu,cpuacct/system.slice/hutchd.service"},
                {"pids", "/sys/fs/cgroup/pids/system.slice/hutchd.service"}}));
  auto box = host->boxCgroup("b");
  ASSERT_TRUE(box);
  EXPECT_EQ(box->dirFor("cpu"), box->dirFor("cpuacct"));
  EXPECT_FALSE(box->dirFor("blkio"));
}

TEST(CgroupHostTest, V2UsesTheDaemonCgroupOrItsParentWhenInTheLeaf) {
  std::string_view mountinfo =
      "30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
  auto fresh = CgroupHost::fromText("0::/system.slice/hutchd.service\n", mountinfo);
  ASSERT_TRUE(fresh) << fresh.error().describe();
  EXPECT_EQ(fresh->version(), CgroupVersion::kV2);
  EXPECT_EQ(fresh->baseDirs(),
            (std::vector<CgroupDir>{{"", "/sys/fs/cgroup/system.slice/hutchd.service"}}));
  // After prepare() moved hutchd into its leaf, the same base is found again.
  auto moved = CgroupHost::fromText("0::/system.slice/hutchd.service/hutch-daemon\n", mountinfo);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->baseDirs(), fresh->baseDirs());
  auto box = moved->boxCgroup("abc");
  ASSERT_TRUE(box);
  EXPECT_EQ(
      box->dirs,
      (std::vector<CgroupDir>{{"", "/sys/fs/cgroup/system.slice/hutchd.service/hutch-boxes/abc"}}));
  EXPECT_EQ(*box->dirFor("memory"), *box->dirFor("pids"));
  // The root cgroup (a container with its own cgroup namespace).
  auto root = CgroupHost::fromText("0::/\n", mountinfo);
  ASSERT_TRUE(root);
  EXPECT_EQ(root->baseDirs(), (std::vector<CgroupDir>{{"", "/sys/fs/cgroup"}}));
}

TEST(CgroupHostTest, AParentPutsBoxesOutsideTheDaemonCgroup) {
  std::string_view v2 =
      "30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
  auto host = CgroupHost::fromText("0::/system.slice/hutchd.service\n", v2, "/hutch");
  ASSERT_TRUE(host) << host.error().describe();
  EXPECT_EQ(host->baseDirs(),
            (std::vector<CgroupDir>{{"", "/sys/fs/cgroup/system.slice/hutchd.service"}}));
  EXPECT_EQ(host->boxesDirs(), (std::vector<CgroupDir>{{"", "/sys/fs/cgroup/hutch"}}));
  auto box = host->boxCgroup("abc");
  ASSERT_TRUE(box);
  EXPECT_EQ(box->dirs, (std::vector<CgroupDir>{{"", "/sys/fs/cgroup/hutch/abc"}}));
  // Where a hutchd without the parent put the same box: adopted and removed from there.
  auto legacy = host->legacyBoxCgroup("abc");
  ASSERT_TRUE(legacy);
  EXPECT_EQ(
      legacy->dirs,
      (std::vector<CgroupDir>{{"", "/sys/fs/cgroup/system.slice/hutchd.service/hutch-boxes/abc"}}));
  // Deeper parents and extra slashes; no legacy place without a parent.
  auto deep = CgroupHost::fromText("0::/x\n", v2, "/a//b.c/");
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->boxesDirs(), (std::vector<CgroupDir>{{"", "/sys/fs/cgroup/a/b.c"}}));
  auto plain = CgroupHost::fromText("0::/x\n", v2);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->legacyBoxCgroup("abc"));

  // v1: the same parent in every hierarchy.
  auto v1 = CgroupHost::fromText(kV1Cgroup, kV1Mountinfo, "/hutch");
  ASSERT_TRUE(v1) << v1.error().describe();
  for (const CgroupDir& dir : v1->boxesDirs()) {
    EXPECT_EQ(dir.path.filename(), "hutch") << dir.path;
    EXPECT_EQ(dir.path.parent_path().parent_path(), "/sys/fs/cgroup") << dir.path;
  }
  EXPECT_EQ(v1->boxesDirs().size(), v1->baseDirs().size());
}

TEST(CgroupHostTest, ABadParentIsRefusedWithWhatToGive) {
  std::string_view v2 = "30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  for (std::string_view parent : {"hutch", "/", "//", "/a/../b", "/a b", "/./x"}) {
    auto host = CgroupHost::fromText("0::/\n", v2, parent);
    ASSERT_FALSE(host) << parent;
    EXPECT_EQ(host.error().code(), Errc::kInvalidArgument) << parent;
    EXPECT_NE(host.error().describe().find("such as /hutch"), std::string::npos)
        << host.error().describe();
  }
  // A mount that shows only a subtree (a container's view) cannot reach the parent.
  std::string_view sub = "30 24 0:26 /pod /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  auto hidden = CgroupHost::fromText("0::/pod/x\n", sub, "/hutch");
  ASSERT_FALSE(hidden);
  EXPECT_EQ(hidden.error().code(), Errc::kUnsupported);
}

TEST(CgroupHostTest, ErrorsSayWhatIsMissing) {
  auto none = CgroupHost::fromText("0::/\n", "");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), Errc::kUnsupported);
  auto host = CgroupHost::fromText("0::/\n", "1 0 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  ASSERT_TRUE(host);
  EXPECT_FALSE(host->boxCgroup("../escape"));
  EXPECT_FALSE(host->boxCgroup("a/b"));
  EXPECT_FALSE(host->boxCgroup(""));
}

TEST(CgroupLimitsTest, ForVm) {
  CgroupLimits limits = CgroupLimits::forVm(2, 512, kVmmOverheadMib);
  EXPECT_EQ(limits.memory_max, uint64_t{768} << 20);
  EXPECT_EQ(limits.cpu_quota_us, 200000U);
  EXPECT_EQ(limits.cpu_period_us, 100000U);
  EXPECT_EQ(limits.pids_max, 130U);
}

TEST(CgroupLimitsTest, OomReason) {
  CgroupUsage usage;
  EXPECT_FALSE(oomKillReason(usage, "QEMU"));
  usage.oom_kills = 1;
  usage.memory_max = uint64_t{600} << 20;
  EXPECT_EQ(*oomKillReason(usage, "QEMU"),
            "QEMU was killed by the OOM killer (memory.max 600 MiB)");
}

// The v2 file handling, on a directory tree that looks like cgroupfs (this host is v1).
class FakeCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-cgroup-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "hutch-boxes");
  }
  void TearDown() override { fs::remove_all(root_); }
  void put(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }
  std::string get(const fs::path& file) {
    auto text = sys::readFile(file);
    return text ? *text : "(missing)";
  }
  fs::path root_;
};

TEST_F(FakeCgroupTest, V2LimitsUsageAndOom) {
  BoxCgroup box{CgroupVersion::kV2, {{"", root_ / "hutch-boxes" / "b1"}}};
  ASSERT_TRUE(box.create());
  fs::path dir = root_ / "hutch-boxes" / "b1";
  for (const char* file : {"memory.max", "memory.swap.max", "memory.oom.group", "cpu.max",
                           "pids.max", "cgroup.procs"}) {
    put(dir / file, "");
  }
  CgroupLimits limits{.memory_max = 600 << 20,
                      .cpu_quota_us = 150000,
                      .cpu_period_us = 100000,
                      .pids_max = 64,
                      .io_weight = 100};
  auto applied = box.applyLimits(limits);
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(get(dir / "memory.max"), "629145600");
  EXPECT_EQ(get(dir / "memory.swap.max"), "0");
  EXPECT_EQ(get(dir / "memory.oom.group"), "1");
  EXPECT_EQ(get(dir / "cpu.max"), "150000 100000");
  EXPECT_EQ(get(dir / "pids.max"), "64");
  EXPECT_EQ(applied->written, (std::vector<std::string>{"memory.max=629145600", "memory.swap.max=0",
                                                        "memory.oom.group=1",
                                                        "cpu.max=150000 100000", "pids.max=64"}));
  // No weight file: said, not silent.
  ASSERT_EQ(applied->warnings.size(), 1U);
  EXPECT_NE(applied->warnings[0].find("No io weight: " + dir.string() +
                                      " has none of io.weight, io.bfq.weight"),
            std::string::npos)
      << applied->warnings[0];

  put(dir / "memory.current", "1048576\n");
  put(dir / "memory.peak", "2097152\n");
  put(dir / "memory.max", "629145600\n");
  put(dir / "memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n");
  put(dir / "cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n");
  put(dir / "pids.current", "3\n");
  put(dir / "pids.max", "max\n");
  auto usage = box.usage();
  ASSERT_TRUE(usage) << usage.error().describe();
  EXPECT_EQ(*usage, (CgroupUsage{.memory_current = 1 << 20,
                                 .memory_peak = 2 << 20,
                                 .memory_max = 600 << 20,
                                 .cpu_usage_ns = 2500000,
                                 .pids_current = 3,
                                 .pids_max = 0,
                                 .oom_kills = 1,
                                 .io_weights = {}}));
  EXPECT_EQ(*oomKillReason(*usage, "QEMU"),
            "QEMU was killed by the OOM killer (memory.max 600 MiB)");
}

TEST_F(FakeCgroupTest, MissingRequiredControllerIsAnErrorThatSaysHowToFixIt) {
  BoxCgroup box{CgroupVersion::kV2, {{"", root_ / "hutch-boxes" / "b2"}}};
  ASSERT_TRUE(box.create());
  auto applied = box.applyLimits(CgroupLimits{.memory_max = 1 << 30});
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code(), Errc::kUnsupported);
  EXPECT_NE(applied.error().message().find("memory controller"), std::string::npos);
  EXPECT_NE(applied.error().message().find("Delegate=yes"), std::string::npos);
}

TEST_F(FakeCgroupTest, V1LimitsGoToEachHierarchy) {
  BoxCgroup box{CgroupVersion::kV1,
                {{"memory", root_ / "memory" / "b"},
                 {"cpu,cpuacct", root_ / "cpu" / "b"},
                 {"pids", root_ / "pids" / "b"}}};
  for (const CgroupDir& dir : box.dirs) fs::create_directories(dir.path);
  put(root_ / "memory" / "b" / "memory.limit_in_bytes", "");
  put(root_ / "memory" / "b" / "memory.memsw.limit_in_bytes", "");
  put(root_ / "cpu" / "b" / "cpu.cfs_period_us", "");
  put(root_ / "cpu" / "b" / "cpu.cfs_quota_us", "");
  put(root_ / "pids" / "b" / "pids.max", "");
  auto applied = box.applyLimits(CgroupLimits::forVm(1, 256, 64));
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(get(root_ / "memory" / "b" / "memory.limit_in_bytes"), "335544320");
  EXPECT_EQ(get(root_ / "memory" / "b" / "memory.memsw.limit_in_bytes"), "335544320");
  EXPECT_EQ(get(root_ / "cpu" / "b" / "cpu.cfs_quota_us"), "100000");
  EXPECT_EQ(get(root_ / "pids" / "b" / "pids.max"), "129");
  ASSERT_EQ(applied->warnings.size(), 1U);
  EXPECT_NE(applied->warnings[0].find("No io weight: there is no blkio hierarchy"),
            std::string::npos)
      << applied->warnings[0];
}

// The io weight goes to every weight file the kernel offers, each on its own scale, and reads
// back as the kernel shows it; where none exists the warning names the files it looked for.
TEST_F(FakeCgroupTest, IoWeightIsWrittenWhereverTheKernelOffersOne) {
  struct Case {
    CgroupVersion version;
    std::vector<std::string> present;
    std::vector<std::string> written;
  };
  const Case cases[] = {
      {CgroupVersion::kV1,
       {"blkio.weight", "blkio.bfq.weight"},
       {"blkio.weight=1000", "blkio.bfq.weight=200"}},
      {CgroupVersion::kV1, {"blkio.bfq.weight"}, {"blkio.bfq.weight=200"}},  // this host
      {CgroupVersion::kV1, {"blkio.weight"}, {"blkio.weight=1000"}},
      {CgroupVersion::kV1, {}, {}},
      {CgroupVersion::kV2,
       {"io.weight", "io.bfq.weight"},
       {"io.weight=default 200", "io.bfq.weight=200"}},
      {CgroupVersion::kV2, {"io.bfq.weight"}, {"io.bfq.weight=200"}},
      {CgroupVersion::kV2, {}, {}},
  };
  int n = 0;
  for (const Case& c : cases) {
    fs::path dir = root_ / ("w" + std::to_string(n++));
    fs::create_directories(dir);
    BoxCgroup box{c.version, {{c.version == CgroupVersion::kV1 ? "blkio" : "", dir}}};
    for (const std::string& file : c.present) put(dir / file, "");
    auto applied = box.applyLimits(CgroupLimits{.io_weight = 200});
    ASSERT_TRUE(applied) << applied.error().describe();
    EXPECT_EQ(applied->written, c.written) << dir;
    for (const std::string& written : c.written) {
      std::string file = written.substr(0, written.find('='));
      EXPECT_EQ(get(dir / file), written.substr(written.find('=') + 1)) << file;
    }
    if (c.present.empty()) {
      ASSERT_EQ(applied->warnings.size(), 1U) << dir;
      EXPECT_NE(applied->warnings[0].find("No io weight: " + dir.string() + " has none of "),
                std::string::npos)
          << applied->warnings[0];
    } else {
      EXPECT_TRUE(applied->warnings.empty()) << applied->warnings[0];
    }
  }
  // Read back as the kernels write them: a bare number (v1 bfq) or "default N" and per-device
  // lines (v2).
  fs::path v1 = root_ / "r1";
  fs::path v2 = root_ / "r2";
  fs::create_directories(v1);
  fs::create_directories(v2);
  put(v1 / "memory.usage_in_bytes", "4096\n");
  put(v1 / "blkio.bfq.weight", "100\n");
  put(v2 / "memory.current", "4096\n");
  put(v2 / "io.weight", "default 100\n8:0 50\n");
  put(v2 / "io.bfq.weight", "default 300\n");
  BoxCgroup r1{CgroupVersion::kV1, {{"memory,blkio", v1}}};
  BoxCgroup r2{CgroupVersion::kV2, {{"", v2}}};
  EXPECT_EQ(r1.usage()->io_weights, (std::map<std::string, uint64_t>{{"blkio.bfq.weight", 100}}));
  EXPECT_EQ(r2.usage()->io_weights,
            (std::map<std::string, uint64_t>{{"io.weight", 100}, {"io.bfq.weight", 300}}));
}

TEST_F(FakeCgroupTest, CreateReplacesAnEmptyLeftoverAndRemoveIsIdempotent) {
  BoxCgroup box{CgroupVersion::kV2, {{"", root_ / "hutch-boxes" / "b3"}}};
  ASSERT_TRUE(box.create());
  ASSERT_TRUE(box.create());  // the empty leftover is replaced
  ASSERT_TRUE(box.remove());
  EXPECT_FALSE(fs::exists(root_ / "hutch-boxes" / "b3"));
  EXPECT_TRUE(box.remove());
  BoxCgroup orphan{CgroupVersion::kV2, {{"", root_ / "no-parent" / "b4"}}};
  auto created = orphan.create();
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code(), Errc::kFailedPrecondition);
}

TEST_F(FakeCgroupTest, V2PrepareEnablesDelegatedControllersDownToHutchBoxes) {
  fs::path base = root_ / "system.slice" / "hutchd.service";
  fs::create_directories(base);
  put(base / "cgroup.controllers", "cpuset cpu io memory pids\n");
  put(base / "cgroup.subtree_control", "");
  // The kernel makes a new cgroup's files; a plain directory needs them beforehand.
  fs::create_directories(base / "hutch-boxes");
  put(base / "hutch-boxes" / "cgroup.subtree_control", "");
  std::string mountinfo = "1 0 0:1 / " + root_.string() + " rw - cgroup2 cgroup2 rw\n";
  auto host = CgroupHost::fromText("0::/system.slice/hutchd.service\n", mountinfo);
  ASSERT_TRUE(host) << host.error().describe();
  EXPECT_EQ(host->baseDirs(), (std::vector<CgroupDir>{{"", base}}));
  auto warnings = host->prepare();
  ASSERT_TRUE(warnings) << warnings.error().describe();
  EXPECT_TRUE(warnings->empty());
  // Each controller is enabled on its own (a plain file keeps the last write): io comes last.
  EXPECT_EQ(get(base / "cgroup.subtree_control"), "+io");
  EXPECT_EQ(get(base / "hutch-boxes" / "cgroup.subtree_control"), "+io");

  // A parent that does not delegate cpu and io: boxes still get memory and pids, with warnings.
  put(base / "cgroup.controllers", "memory pids\n");
  auto partial = host->prepare();
  ASSERT_TRUE(partial);
  ASSERT_EQ(partial->size(), 2U);
  EXPECT_NE((*partial)[0].find("The cpu controller is not delegated"), std::string::npos);
}

TEST_F(FakeCgroupTest, V2PrepareWithAParentEnablesControllersFromTheRootDownAndLeavesTheDaemon) {
  fs::path base = root_ / "system.slice" / "hutchd.service";
  fs::create_directories(base);
  put(base / "cgroup.procs", "42\n");
  put(root_ / "cgroup.controllers", "cpuset cpu io memory pids\n");
  put(root_ / "cgroup.subtree_control", "");
  fs::create_directories(root_ / "hutch");
  put(root_ / "hutch" / "cgroup.subtree_control", "");
  std::string mountinfo = "1 0 0:1 / " + root_.string() + " rw - cgroup2 cgroup2 rw\n";
  auto host = CgroupHost::fromText("0::/system.slice/hutchd.service\n", mountinfo, "/hutch");
  ASSERT_TRUE(host) << host.error().describe();
  auto warnings = host->prepare();
  ASSERT_TRUE(warnings) << warnings.error().describe();
  EXPECT_TRUE(warnings->empty()) << (*warnings)[0];
  EXPECT_EQ(get(root_ / "cgroup.subtree_control"), "+io");
  EXPECT_EQ(get(root_ / "hutch" / "cgroup.subtree_control"), "+io");
  // The daemon's own cgroup is left as it is: no leaf, nothing enabled, nobody moved.
  EXPECT_FALSE(fs::exists(base / kDaemonLeafCgroup));
  EXPECT_FALSE(fs::exists(base / kBoxesCgroup));
  EXPECT_FALSE(fs::exists(base / "cgroup.subtree_control"));
  EXPECT_EQ(get(base / "cgroup.procs"), "42\n");
}

TEST_F(FakeCgroupTest, V1PrepareWithAParentMakesItInEachHierarchy) {
  fs::create_directories(root_ / "memory" / "svc");
  fs::create_directories(root_ / "pids");
  std::string mountinfo = "1 0 0:1 / " + (root_ / "memory").string() +
                          " rw - cgroup cgroup rw,memory\n" + "2 0 0:2 / " +
                          (root_ / "pids").string() + " rw - cgroup cgroup rw,pids\n";
  auto host = CgroupHost::fromText("4:memory:/svc\n2:pids:/\n", mountinfo, "/a/hutch");
  ASSERT_TRUE(host) << host.error().describe();
  ASSERT_TRUE(host->prepare());
  EXPECT_TRUE(fs::is_directory(root_ / "memory" / "a" / "hutch"));
  EXPECT_TRUE(fs::is_directory(root_ / "pids" / "a" / "hutch"));
  EXPECT_FALSE(fs::exists(root_ / "memory" / "svc" / kBoxesCgroup));
  ASSERT_TRUE(host->prepare());
}

TEST_F(FakeCgroupTest, V1PrepareMakesHutchBoxesInEachHierarchy) {
  fs::create_directories(root_ / "memory" / "svc");
  fs::create_directories(root_ / "pids");
  std::string mountinfo = "1 0 0:1 / " + (root_ / "memory").string() +
                          " rw - cgroup cgroup rw,memory\n" + "2 0 0:2 / " +
                          (root_ / "pids").string() + " rw - cgroup cgroup rw,pids\n";
  auto host = CgroupHost::fromText("4:memory:/svc\n2:pids:/\n", mountinfo);
  ASSERT_TRUE(host) << host.error().describe();
  ASSERT_TRUE(host->prepare());
  EXPECT_TRUE(fs::is_directory(root_ / "memory" / "svc" / "hutch-boxes"));
  EXPECT_TRUE(fs::is_directory(root_ / "pids" / "hutch-boxes"));
  ASSERT_TRUE(host->prepare());  // again: nothing to do
}

}  // namespace
}  // namespace hutch::jail

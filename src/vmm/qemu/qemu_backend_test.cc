// What a jailed QEMU is shown, per kind of VM (no QEMU started).
#include "vmm/qemu/qemu_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace hutch::vmm::qemu {
namespace {

using Access = jail::BindPath::Access;

VmSpec boxSpec() {
  VmSpec spec;
  spec.id = "b1";
  spec.kernel = "/images/base/vmlinux";
  spec.initrd = "/images/base/initrd.img";
  spec.disk = "/state/boxes/b1/disk.qcow2";
  spec.run_dir = "/state/boxes/b1";
  return spec;
}

TEST(JailPathsTest, ABootedBoxSeesItsDirTheTemplateAndItsLayers) {
  auto paths = jailPathsFor(boxSpec(), "/usr/bin/qemu-system-x86_64",
                            {"/state/layers/l1.qcow2", "/images/base/rootfs.img"}, "/lib/p.so");
  std::vector<jail::BindPath> want = {
      {"/state/boxes/b1", Access::kReadWrite, false},  // the disk is in it
      {"/images/base/vmlinux", Access::kReadOnly, false},
      {"/images/base/initrd.img", Access::kReadOnly, false},
      {"/state/layers/l1.qcow2", Access::kReadOnly, false},
      {"/images/base/rootfs.img", Access::kReadOnly, false},
  };
  EXPECT_EQ(paths, want);
}

TEST(JailPathsTest, ARestoredBoxMapsTheSnapshotRamReadOnlyWithThePreload) {
  VmSpec spec = boxSpec();
  spec.ram = GuestRam::kMappedFile;
  spec.memory_file = "/state/snapshots/s1/memory";
  spec.incoming_state = "/state/snapshots/s1/state";  // passed as a descriptor, never bound
  auto paths = jailPathsFor(spec, "/opt/qemu/bin/qemu-system-x86_64",
                            {"/state/snapshots/s1/layer.qcow2"}, "/lib/p.so");
  std::vector<jail::BindPath> want = {
      {"/state/boxes/b1", Access::kReadWrite, false},
      {"/images/base/vmlinux", Access::kReadOnly, false},
      {"/images/base/initrd.img", Access::kReadOnly, false},
      {"/state/snapshots/s1/layer.qcow2", Access::kReadOnly, false},
      {"/state/snapshots/s1/memory", Access::kReadOnly, false},
      {"/lib/p.so", Access::kReadOnly, true},
      {"/opt/qemu/bin/qemu-system-x86_64", Access::kReadOnly, true},  // not under /usr
  };
  EXPECT_EQ(paths, want);
}

TEST(JailPathsTest, ATemplateVmWritesItsRunDirOnly) {
  VmSpec spec = boxSpec();
  spec.run_dir = "/state/snapshots/s1";
  spec.disk = "/state/snapshots/s1/layer.qcow2";
  spec.ram = GuestRam::kSharedFile;
  spec.memory_file = "/state/snapshots/s1/memory";
  auto paths =
      jailPathsFor(spec, "/usr/bin/qemu-system-x86_64", {"/images/base/rootfs.img"}, "/lib/p.so");
  std::vector<jail::BindPath> want = {
      {"/state/snapshots/s1", Access::kReadWrite, false},
      {"/images/base/vmlinux", Access::kReadOnly, false},
      {"/images/base/initrd.img", Access::kReadOnly, false},
      {"/images/base/rootfs.img", Access::kReadOnly, false},
  };
  EXPECT_EQ(paths, want);
}

TEST(JailPathsTest, FilesOutsideTheRunDirAreBoundOnceAtTheirOwnPaths) {
  VmSpec spec = boxSpec();
  spec.initrd.clear();
  spec.disk = "/elsewhere/disk.qcow2";
  spec.ram = GuestRam::kSharedFile;
  spec.memory_file = "/elsewhere/memory";
  auto paths = jailPathsFor(spec, "/usr/bin/qemu-system-x86_64",
                            {"/state/layers/a.qcow2", "/state/layers/../layers/a.qcow2"}, "");
  std::vector<jail::BindPath> want = {
      {"/state/boxes/b1", Access::kReadWrite, false},
      {"/images/base/vmlinux", Access::kReadOnly, false},
      {"/elsewhere/disk.qcow2", Access::kReadWrite, false},
      {"/state/layers/a.qcow2", Access::kReadOnly, false},
      {"/elsewhere/memory", Access::kReadWrite, false},
  };
  EXPECT_EQ(paths, want);
}

// A VM's cgroup is its run dir's: what adoption finds again from hutchd's own records.
TEST(VmCgroupTest, IsNamedAfterTheRunDir) {
  EXPECT_EQ(vmCgroupName("/state/boxes/b1"), "b1");
  EXPECT_EQ(vmCgroupName("/state/boxes/b1/"), "b1");
  EXPECT_EQ(vmCgroupName("/state/snapshots/s1/."), "s1");
}

// Adoption judges a jailed QEMU by its kernel-kept ids against the run dir's owner.
TEST(AdoptedJailTest, TrustsTheKernelsIdsNotTheProcess) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  char tmpl[] = "/tmp/hutch-adopt-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::filesystem::path dir = tmpl;
  auto cgroups = jail::CgroupHost::fromText("0::/\n", "1 0 0:1 / /nonexistent rw - cgroup2 c rw\n");
  ASSERT_TRUE(cgroups) << cgroups.error().describe();
  // Root's run dir: a QEMU an unjailed hutchd started, nothing to check.
  auto unjailed = adoptedJail(dir, ::getpid(), *cgroups);
  ASSERT_TRUE(unjailed) << unjailed.error().describe();
  EXPECT_FALSE(*unjailed);
  // A box's run dir, and a process (this test, root) that is not of that box.
  ASSERT_EQ(::chown(dir.c_str(), 2080374785, 2080374785), 0);
  auto refused = adoptedJail(dir, ::getpid(), *cgroups);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Errc::kFailedPrecondition);
  EXPECT_NE(refused.error().message().find("it runs with Uid 0 0 0 0, not the run dir's owner "
                                           "2080374785"),
            std::string::npos)
      << refused.error().message();
  std::filesystem::remove_all(dir);
}

TEST(CpuModelTest, OnlyModelsQemuListsPass) {
  // The shape of QEMU 7.2's `-cpu help`: models first, then the flags, listed apart.
  const std::string help =
      "Available CPUs:\n"
      "x86 486                   (alias configured by machine type)\n"
      "x86 Haswell-v4            Intel Core Processor (Haswell, no TSX, IBRS)\n"
      "x86 max                   Enables all features supported by the accelerator\n"
      "x86 qemu64                (alias configured by machine type)\n"
      "\n"
      "Recognized CPUID flags:\n"
      "  avx2 sse4.2 hle\n";
  EXPECT_TRUE(checkCpuModel("max", help));
  EXPECT_TRUE(checkCpuModel("Haswell-v4,-hle,+avx2", help));
  auto typo = checkCpuModel("Haswel", help);
  ASSERT_FALSE(typo);
  EXPECT_EQ(typo.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(typo.error().message().find("no CPU model 'Haswel'"), std::string::npos);
  EXPECT_FALSE(checkCpuModel("avx2", help));  // a flag, not a model
  EXPECT_FALSE(checkCpuModel("", help));
  EXPECT_FALSE(checkCpuModel("max", ""));
}

}  // namespace
}  // namespace hutch::vmm::qemu

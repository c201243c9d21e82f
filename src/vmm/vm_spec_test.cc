#include "vmm/vm_spec.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace hutch::vmm {
namespace {

class VmSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-spec-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* name : {"vmlinux", "initrd.img", "disk.qcow2"})
      std::ofstream(dir_ / name) << "x";
    spec_.id = "box-1";
    spec_.kernel = dir_ / "vmlinux";
    spec_.initrd = dir_ / "initrd.img";
    spec_.disk = dir_ / "disk.qcow2";
    spec_.run_dir = dir_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The validation error message for the current spec_, or "" if valid.
  std::string problem() {
    auto r = spec_.validate();
    return r ? "" : r.error().message();
  }

  std::filesystem::path dir_;
  VmSpec spec_;
};

TEST_F(VmSpecTest, ValidSpecPasses) {
  EXPECT_EQ(problem(), "");
}

TEST_F(VmSpecTest, RangesAreChecked) {
  spec_.cpus = 0;
  EXPECT_EQ(problem(), "cpus is 0: use a value from 1 to 64");
  spec_.cpus = 65;
  EXPECT_NE(problem(), "");
  spec_.cpus = 64;
  EXPECT_EQ(problem(), "");
  spec_.memory_mib = 127;
  EXPECT_EQ(problem(), "memory is 127 MiB: use a value from 128 to 65536 MiB");
  spec_.memory_mib = 65537;
  EXPECT_NE(problem(), "");
  spec_.memory_mib = 128;
  EXPECT_EQ(problem(), "");
}

TEST_F(VmSpecTest, IdIsChecked) {
  spec_.id = "";
  EXPECT_EQ(problem(), "Set the VM id");
  spec_.id = "a,b";
  EXPECT_NE(problem().find("is invalid"), std::string::npos);
}

TEST_F(VmSpecTest, TcgCpuModelIsOneQemuArgument) {
  for (const char* ok : {"max", "Haswell-v4,-hle,+avx2", "qemu64,avx2=on"}) {
    spec_.tcg_cpu_model = ok;
    EXPECT_EQ(problem(), "") << ok;
  }
  // Nothing that a shell or QEMU's option parser could read as more than a model and flags.
  const std::vector<std::string> bad_models = {"max -device x", "max\n", "max;id",
                                               std::string(129, 'a')};
  for (const std::string& bad : bad_models) {
    spec_.tcg_cpu_model = bad;
    EXPECT_NE(problem().find("'qemu-system-x86_64 -cpu help' lists them"), std::string::npos)
        << bad;
  }
}

TEST_F(VmSpecTest, FilesMustExist) {
  spec_.disk = dir_ / "missing.qcow2";
  auto r = spec_.validate();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kNotFound);
  EXPECT_EQ(r.error().message(),
            "The disk " + (dir_ / "missing.qcow2").string() + " does not exist: check the path");
  spec_.disk = dir_;
  EXPECT_NE(problem().find("is not a regular file"), std::string::npos);
  spec_.disk = dir_ / "disk.qcow2";
  spec_.kernel.clear();
  EXPECT_EQ(problem(), "Set the kernel path");
  spec_.kernel = dir_ / "vmlinux";
  spec_.initrd.clear();  // no initrd is allowed
  EXPECT_EQ(problem(), "");
  spec_.initrd = dir_ / "nope";
  EXPECT_NE(problem().find("initrd"), std::string::npos);
}

TEST_F(VmSpecTest, RunDirMustExistAndBeShort) {
  spec_.run_dir = dir_ / "nope";
  EXPECT_NE(problem().find("create it first"), std::string::npos);
  spec_.run_dir = dir_ / std::string(120, 'r');
  std::filesystem::create_directory(spec_.run_dir);
  EXPECT_NE(problem().find("use a shorter run directory"), std::string::npos);
}

TEST_F(VmSpecTest, NetworkNeedsAnExistingNamespaceATapNameAndAMac) {
  spec_.netns = dir_ / "no-such-netns";
  EXPECT_NE(problem().find("make the box's network first"), std::string::npos) << problem();
  spec_.netns = dir_ / "vmlinux";  // any existing file stands in for /run/netns/NAME
  EXPECT_EQ(problem(), "");
  spec_.mac = "52:54:00:12:34";
  EXPECT_NE(problem().find("is not a MAC address"), std::string::npos) << problem();
  spec_.mac = "52:54:00:12:34:56";
  spec_.tap = std::string(16, 't');
  EXPECT_NE(problem().find("is not a tap device name"), std::string::npos) << problem();
}

TEST_F(VmSpecTest, GuestParamsAreChecked) {
  spec_.guest_params["hostname"] = "box-1";
  EXPECT_EQ(problem(), "");
  spec_.guest_params["bad key"] = "x";
  EXPECT_NE(problem().find("name 'bad key' is invalid"), std::string::npos);
  spec_.guest_params.erase("bad key");
  spec_.guest_params["motd"] = "hello world";
  EXPECT_NE(problem().find("spaces or quotes"), std::string::npos);
}

TEST_F(VmSpecTest, SharesNeedTagsAbsolutePathsAndAColdBoot) {
  spec_.shares = {{.tag = "share0", .host_dir = "/home/a/p"}};
  EXPECT_EQ(problem(), "");
  spec_.shares.push_back({.tag = "share0", .host_dir = "/srv"});
  EXPECT_NE(problem().find("Two shares"), std::string::npos);
  spec_.shares = {{.tag = "a b", .host_dir = "/srv"}};
  EXPECT_NE(problem().find("tag"), std::string::npos);
  spec_.shares = {{.tag = std::string(37, 'x'), .host_dir = "/srv"}};
  EXPECT_NE(problem().find("tag"), std::string::npos);
  spec_.shares = {{.tag = "s", .host_dir = "relative"}};
  EXPECT_NE(problem().find("absolute"), std::string::npos);
  spec_.shares = {{.tag = "s", .host_dir = "/srv"}};
  spec_.incoming_later = true;
  EXPECT_NE(problem().find("boots cold"), std::string::npos);
}

TEST(AccelNameTest, RoundTrips) {
  EXPECT_EQ(accelName(Accel::kKvm), "kvm");
  EXPECT_EQ(*parseAccel("tcg"), Accel::kTcg);
  EXPECT_EQ(*parseAccel(accelName(Accel::kKvm)), Accel::kKvm);
  auto bad = parseAccel("hvf");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "Unknown acceleration 'hvf': use kvm or tcg");
}

}  // namespace
}  // namespace hutch::vmm

#include "jail/jail_spec.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace hutch::jail {
namespace {

JailSpec sample() {
  JailSpec spec;
  spec.name = "b1";
  spec.uid = 2080374785;
  spec.gid = 2080374785;
  spec.cwd = "/var/lib/hutch/boxes/b1";
  spec.paths = {{"/var/lib/hutch/boxes/b1", BindPath::Access::kReadWrite, false},
                {"/var/lib/hutch/images/x/vmlinux", BindPath::Access::kReadOnly, false}};
  spec.devices = {"/dev/kvm"};
  spec.netns = "/run/netns/b1";
  spec.cgroup = BoxCgroup{CgroupVersion::kV1,
                          {{"memory", "/sys/fs/cgroup/memory/hutch-boxes/b1"},
                           {"pids", "/sys/fs/cgroup/pids/hutch-boxes/b1"}}};
  spec.limits = CgroupLimits::forVm(2, 512, kVmmOverheadMib);
  spec.max_processes = 200;
  spec.env = {"PATH=/usr/bin"};
  spec.keep_fds = {3};
  return spec;
}

std::string errorOf(std::string_view json) {
  auto spec = parseJailSpec(json);
  if (spec) return "(parsed)";
  EXPECT_EQ(spec.error().code(), Errc::kInvalidArgument);
  return spec.error().message();
}

TEST(JailSpecTest, RoundTripsThroughJson) {
  JailSpec spec = sample();
  auto parsed = parseJailSpec(toJson(spec));
  ASSERT_TRUE(parsed) << parsed.error().describe();
  EXPECT_EQ(*parsed, spec);
  JailSpec minimal;
  minimal.uid = 5;
  minimal.gid = 6;
  minimal.allow_no_cgroup = true;
  minimal.legacy_proc = true;
  auto back = parseJailSpec(toJson(minimal));
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(*back, minimal);
}

TEST(JailSpecTest, DefaultsAreTheSafeOnes) {
  auto spec = parseJailSpec(R"({"version": 1, "uid": 5, "gid": 6, "allow_no_cgroup": true})");
  ASSERT_TRUE(spec) << spec.error().describe();
  EXPECT_TRUE(spec->seccomp);
  EXPECT_FALSE(spec->legacy_proc);
  EXPECT_EQ(spec->socket_families, std::vector<std::string>{"unix"});
  EXPECT_FALSE(spec->netns);  // a new, empty network namespace
  EXPECT_TRUE(spec->env.empty());
  EXPECT_EQ(spec->max_open_files, 4096U);
}

TEST(JailSpecTest, BadInputGivesClearErrors) {
  EXPECT_EQ(errorOf("{"), "The jail spec is not valid JSON");
  EXPECT_EQ(errorOf("[]"), "Bad jail spec: spec must be an object");
  EXPECT_NE(errorOf(R"({"uid": 5, "gid": 6})").find("spec.version must be 1"), std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "gid": 6})").find("spec.uid and spec.gid are required"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 0, "gid": 6})").find("must not be 0"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": -3, "gid": 6})")
                .find("spec.uid must be a non-negative integer"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": "5", "gid": 6})").find("spec.uid must be"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "uid_typo": 1})")
                .find("Unknown key spec.uid_typo"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "paths": [{"path": "rel/x"}]})")
                .find("must be an absolute path"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "paths": [{"path": "/a/../etc"}]})")
                .find("must not contain '..'"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6,
                        "paths": [{"path": "/x", "access": "wr"}]})")
                .find(R"(spec.paths[0].access must be "ro" or "rw")"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "paths": [{"path": "/x", "mode": 1}]})")
                .find("Unknown key spec.paths[0].mode"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "devices": ["/etc/shadow"]})")
                .find("must be a node in /dev"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "socket_families": ["packet"]})")
                .find("Unknown socket family 'packet'"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "cgroup": {"version": 3, "dirs": []}})")
                .find("cgroup.version must be 1 or 2"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "cgroup": {"version": 2}})")
                .find("cgroup.dirs must list at least one directory"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "limits": {"memory": 5}})")
                .find("Unknown key limits.memory"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "keep_fds": [1]})")
                .find("0, 1 and 2 are always kept"),
            std::string::npos);
  EXPECT_NE(
      errorOf(R"({"version": 1, "uid": 5, "gid": 6, "env": ["NOVALUE"]})").find("is not KEY=VALUE"),
      std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "paths": [{"path": "/dev/kvm"}]})")
                .find("the jail makes its own /dev"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6, "paths": [{"path": "/"}]})")
                .find("cannot show all of /"),
            std::string::npos);
}

// A jail without a cgroup has no memory, CPU or task limit: only a test may ask for one.
TEST(JailSpecTest, ASpecWithoutACgroupIsRefused) {
  JailSpec spec = sample();
  spec.cgroup.reset();
  auto refused = spec.validate();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("The jail spec has no cgroup"), std::string::npos)
      << refused.error().message();
  EXPECT_NE(errorOf(R"({"version": 1, "uid": 5, "gid": 6})").find("has no cgroup"),
            std::string::npos);
  spec.allow_no_cgroup = true;
  EXPECT_TRUE(spec.validate());
  EXPECT_TRUE(sample().validate());
}

TEST(JailSpecTest, MemfdHoldsTheSpecSealed) {
  auto fd = specMemfd(sample());
  ASSERT_TRUE(fd) << fd.error().describe();
  std::string text(1 << 16, '\0');
  ssize_t n = ::pread(fd->get(), text.data(), text.size(), 0);
  ASSERT_GT(n, 0);
  text.resize(static_cast<size_t>(n));
  EXPECT_EQ(*parseJailSpec(text), sample());
  EXPECT_LT(::write(fd->get(), "x", 1), 0);  // sealed against writes
}

TEST(JailSpecTest, Command) {
  EXPECT_EQ(jailCommand("/usr/lib/hutch/hutch-jail", 3, {"/usr/bin/qemu-system-x86_64", "-S"}),
            (std::vector<std::string>{"/usr/lib/hutch/hutch-jail", "--spec-fd", "3", "--",
                                      "/usr/bin/qemu-system-x86_64", "-S"}));
}

}  // namespace
}  // namespace hutch::jail

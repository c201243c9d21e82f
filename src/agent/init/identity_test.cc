#include "agent/init/identity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hutch::agent {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p);
  out << text;
}

class IdentityApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hutch-identity-XXXXXX";
    ASSERT_TRUE(::mkdtemp(dir));
    root_ = dir;
    files_ = IdentityFiles::under(root_);
    system_ = recordingSystemControl(root_);
    spit(files_.hosts, "127.0.0.1\tlocalhost\n127.0.1.1\tsnapshot\n::1\tlocalhost ip6-localhost\n");
    spit(files_.hostname, "snapshot\n");
    spit(files_.machine_id, "ffffffffffffffffffffffffffffffff\n");
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string root_;
  IdentityFiles files_;
  std::unique_ptr<SystemControl> system_;
};

TEST(HostsEntryTest, ReplacesThePreviousBoxsLine) {
  EXPECT_EQ(withHostsEntry("127.0.0.1\tlocalhost\n127.0.1.1\told\n::1 localhost\n", "new"),
            "127.0.0.1\tlocalhost\n127.0.1.1\tnew\n::1 localhost\n");
  // Repeated lines (an older agent appended one per name) collapse into one.
  EXPECT_EQ(withHostsEntry("127.0.1.1 a\n127.0.0.1 localhost\n127.0.1.1\tb\n", "c"),
            "127.0.1.1\tc\n127.0.0.1 localhost\n");
  EXPECT_EQ(withHostsEntry("127.0.0.1\tlocalhost\n", "web"),
            "127.0.0.1\tlocalhost\n127.0.1.1\tweb\n");
  // A comment does not count; a name on another address does.
  EXPECT_EQ(withHostsEntry("# 127.0.1.1 web\n", "web"), "# 127.0.1.1 web\n127.0.1.1\tweb\n");
  EXPECT_EQ(withHostsEntry("127.0.0.1 localhost", "localhost"), "127.0.0.1 localhost\n");
  EXPECT_EQ(withHostsEntry("", "web"), "127.0.1.1\tweb\n");
  // Idempotent.
  const std::string once = withHostsEntry("127.0.0.1 localhost\n", "web");
  EXPECT_EQ(withHostsEntry(once, "web"), once);
}

TEST_F(IdentityApplyTest, AppliesEveryPartInOrder) {
  proto::Identity identity;
  identity.hostname = "clone-7";
  identity.machine_id = "0123456789abcdef0123456789abcdef";
  identity.time_ns = 1700000000123456789;
  identity.seed = std::string(64, 'a');
  ASSERT_TRUE(applyIdentity(identity, *system_, files_));
  EXPECT_EQ(slurp(root_ + "/system.log"), "clock 1700000000123456789\nseed " +
                                              std::string(64, 'a') +
                                              "\nmachine_id\nhostname clone-7\n");
  EXPECT_EQ(slurp(files_.hostname), "clone-7\n");
  EXPECT_EQ(slurp(files_.hosts),
            "127.0.0.1\tlocalhost\n127.0.1.1\tclone-7\n::1\tlocalhost ip6-localhost\n");
  EXPECT_EQ(slurp(files_.machine_id), "0123456789abcdef0123456789abcdef\n");
  struct stat st {};
  ASSERT_EQ(::stat(files_.machine_id.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_FALSE(fs::exists(files_.dbus_machine_id));  // only written when it exists

  // Twice is the same; a second identity replaces the first everywhere.
  ASSERT_TRUE(applyIdentity(identity, *system_, files_));
  identity.hostname = "clone-8";
  ASSERT_TRUE(applyIdentity(identity, *system_, files_));
  EXPECT_EQ(slurp(files_.hosts),
            "127.0.0.1\tlocalhost\n127.0.1.1\tclone-8\n::1\tlocalhost ip6-localhost\n");
  EXPECT_EQ(slurp(files_.hostname), "clone-8\n");
}

TEST_F(IdentityApplyTest, DbusMachineIdIsWrittenWhenItIsAFile) {
  spit(files_.dbus_machine_id, "old\n");
  proto::Identity identity;
  identity.machine_id = "0123456789abcdef0123456789abcdef";
  ASSERT_TRUE(applyIdentity(identity, *system_, files_));
  EXPECT_EQ(slurp(files_.dbus_machine_id), "0123456789abcdef0123456789abcdef\n");
  // A symlink (Debian's layout) is left alone: it already shows /etc/machine-id.
  fs::remove(files_.dbus_machine_id);
  fs::create_symlink(files_.machine_id, files_.dbus_machine_id);
  identity.machine_id = "11111111111111111111111111111111";
  ASSERT_TRUE(applyIdentity(identity, *system_, files_));
  EXPECT_TRUE(fs::is_symlink(files_.dbus_machine_id));
  EXPECT_EQ(slurp(files_.dbus_machine_id), "11111111111111111111111111111111\n");
}

TEST_F(IdentityApplyTest, AbsentFieldsChangeNothing) {
  ASSERT_TRUE(applyIdentity(proto::Identity{}, *system_, files_));
  EXPECT_FALSE(fs::exists(root_ + "/system.log"));
  EXPECT_EQ(slurp(files_.hostname), "snapshot\n");
}

TEST_F(IdentityApplyTest, FailuresAreReportedAfterTryingEveryPart) {
  fs::remove_all(root_ + "/etc");  // no /etc: the files cannot be written
  proto::Identity identity;
  identity.hostname = "web";
  identity.machine_id = "0123456789abcdef0123456789abcdef";
  identity.time_ns = 5;
  auto applied = applyIdentity(identity, *system_, files_);
  ASSERT_FALSE(applied);
  EXPECT_NE(applied.error().message().find("machine-id"), std::string::npos)
      << applied.error().message();
  EXPECT_NE(applied.error().message().find("hostname"), std::string::npos)
      << applied.error().message();
  // The clock and the hostname syscall were still done.
  EXPECT_EQ(slurp(root_ + "/system.log"), "clock 5\nhostname web\n");
}

TEST_F(IdentityApplyTest, BootHostnameFromTheKernelCommandLine) {
  ASSERT_TRUE(applyHostname("console=ttyS0 hutch.hostname=web-1 quiet", *system_, files_));
  EXPECT_EQ(slurp(files_.hostname), "web-1\n");
  EXPECT_NE(slurp(files_.hosts).find("127.0.1.1\tweb-1\n"), std::string::npos);
  EXPECT_EQ(applyHostname("hutch.hostname=a_b", *system_, files_).error().code(),
            Errc::kInvalidArgument);
}

TEST(IdentityFilesTest, UnderARoot) {
  auto files = IdentityFiles::under("/r");
  EXPECT_EQ(files.hosts, "/r/etc/hosts");
  EXPECT_EQ(files.dbus_machine_id, "/r/var/lib/dbus/machine-id");
}

}  // namespace
}  // namespace hutch::agent

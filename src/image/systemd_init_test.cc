#include "image/systemd_init.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "image/test_tar.h"

namespace hutch::image {
namespace {

namespace fs = std::filesystem;
using testing::snapshot;
using testing::TempDir;

std::string readHost(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void writeHost(const fs::path& p, const std::string& text, fs::perms perms) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  fs::permissions(p, perms);
}

TEST(SystemdInitTest, AMergedUsrTreeBootsItsSystemdWithTheAgentAsAService) {
  TempDir tmp;
  const fs::path host = tmp.path();
  writeHost(host / "usr/lib/systemd/systemd", "ELF", fs::perms(0755));
  fs::create_directory_symlink("usr/lib", host / "lib");
  // The image's own file of a masked unit's name stays; an old link of it is replaced.
  writeHost(host / "etc/systemd/system/fstrim.timer", "[Timer]\n", fs::perms(0644));
  fs::create_symlink("/lib/systemd/system/getty.target", host / "etc/systemd/system/getty.target");
  auto root = RootDir::open(host);
  ASSERT_TRUE(root);

  auto systemd = addSystemdInit(*root);
  ASSERT_TRUE(systemd) << systemd.error().describe();
  EXPECT_EQ(*systemd, "/usr/lib/systemd/systemd");
  EXPECT_EQ(readHost(host / "etc/hutch/init"), "/usr/lib/systemd/systemd\n");
  EXPECT_EQ(readHost(host / "etc/hutch/ready"), systemdReadyCheck());
  EXPECT_NE(systemdReadyCheck().find("systemctl is-system-running"), std::string_view::npos);
  EXPECT_EQ(fs::status(host / "etc/hutch/ready").permissions(), fs::perms(0755));
  const fs::path units = host / "etc/systemd/system";
  EXPECT_EQ(readHost(units / "hutch-agent.service"), systemdAgentUnit());
  EXPECT_NE(systemdAgentUnit().find("ExecStart=/usr/sbin/hutch-agent --service"),
            std::string_view::npos);
  EXPECT_EQ(fs::read_symlink(units / "basic.target.wants/hutch-agent.service"),
            "/etc/systemd/system/hutch-agent.service");
  EXPECT_EQ(fs::read_symlink(units / "getty.target"), "/dev/null");
  EXPECT_EQ(fs::read_symlink(units / "apt-daily.timer"), "/dev/null");
  EXPECT_EQ(readHost(units / "fstrim.timer"), "[Timer]\n");

  // Again (a rebuild of the same tree) is the same.
  auto again = addSystemdInit(*root);
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_EQ(fs::read_symlink(units / "basic.target.wants/hutch-agent.service"),
            "/etc/systemd/system/hutch-agent.service");
}

TEST(SystemdInitTest, ASplitUsrTreeNamesLibAndATreeWithoutSystemdIsRefusedUntouched) {
  TempDir tmp;
  const fs::path host = tmp.path();
  writeHost(host / "lib/systemd/systemd", "ELF", fs::perms(0755));
  auto root = RootDir::open(host);
  ASSERT_TRUE(root);
  EXPECT_EQ(addSystemdInit(*root).value(), "/lib/systemd/systemd");

  TempDir bare_tmp;
  writeHost(bare_tmp.path() / "bin/sh", "ELF", fs::perms(0755));
  // Not executable is not a systemd either.
  writeHost(bare_tmp.path() / "usr/lib/systemd/systemd", "text", fs::perms(0644));
  const auto before = snapshot(bare_tmp.path());
  auto bare = RootDir::open(bare_tmp.path());
  ASSERT_TRUE(bare);
  auto refused = addSystemdInit(*bare);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Errc::kFailedPrecondition);
  EXPECT_NE(refused.error().message().find("install systemd"), std::string::npos);
  EXPECT_EQ(snapshot(bare_tmp.path()), before);
}

TEST(SystemdInitTest, ASymlinkedEtcCannotLeadOutsideTheTree) {
  TempDir tmp;
  const fs::path host = tmp.path() / "root";
  const fs::path outside = tmp.path() / "outside";
  fs::create_directories(outside);
  writeHost(host / "usr/lib/systemd/systemd", "ELF", fs::perms(0755));
  fs::create_directory_symlink(outside, host / "etc");  // absolute: the host's, not the image's
  const auto before = snapshot(outside);
  auto root = RootDir::open(host);
  ASSERT_TRUE(root);
  // Made inside the tree or refused, never written through the link.
  (void)addSystemdInit(*root);
  EXPECT_EQ(snapshot(outside), before);
  EXPECT_FALSE(fs::exists(outside / "hutch"));
}

}  // namespace
}  // namespace hutch::image

#include "jail/box_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "sys/run.h"
#include "sys/spawn.h"

namespace hutch::jail {
namespace {

namespace fs = std::filesystem;

class BoxDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-boxdir-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    box_ = root_ / "box";
    fs::create_directories(box_ / "snapshots");
    std::ofstream(box_ / "disk.qcow2") << "disk";
    std::ofstream(box_ / "qemu.log") << "log";
    std::ofstream(box_ / "snapshots" / "state") << "state";
  }
  void TearDown() override { fs::remove_all(root_); }
  static struct stat statOf(const fs::path& path) {
    struct stat st {};
    ::lstat(path.c_str(), &st);
    return st;
  }
  fs::path root_;
  fs::path box_;
  BoxIds ids_{2080374800, 2080374800};
};

TEST_F(BoxDirTest, GivesTheTreeToTheBoxButKeepsHutchdFilesRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "Needs root to chown";
  ASSERT_TRUE(prepareBoxDir(box_, ids_)) << prepareBoxDir(box_, ids_).error().describe();
  EXPECT_EQ(statOf(box_).st_uid, ids_.uid);
  EXPECT_EQ(statOf(box_).st_mode & 07777, 0700U);
  EXPECT_EQ(statOf(box_ / "disk.qcow2").st_uid, ids_.uid);
  EXPECT_EQ(statOf(box_ / "disk.qcow2").st_gid, ids_.gid);
  EXPECT_EQ(statOf(box_ / "snapshots" / "state").st_uid, ids_.uid);
  EXPECT_EQ(statOf(box_ / "qemu.log").st_uid, 0U);
}

TEST_F(BoxDirTest, RefusesSymlinksAndHardLinks) {
  if (::geteuid() != 0) GTEST_SKIP() << "Needs root to chown";
  fs::create_symlink("/etc/shadow", box_ / "console.log");
  auto linked = prepareBoxDir(box_, ids_);
  ASSERT_FALSE(linked);
  EXPECT_NE(linked.error().message().find("is a symlink"), std::string::npos);
  EXPECT_EQ(statOf("/etc/shadow").st_uid, 0U);
  fs::remove(box_ / "console.log");
  fs::create_hard_link(box_ / "disk.qcow2", root_ / "elsewhere");
  auto hard = prepareBoxDir(box_, ids_);
  ASSERT_FALSE(hard);
  EXPECT_NE(hard.error().message().find("hard links"), std::string::npos);
}

TEST_F(BoxDirTest, RefusesRootIds) {
  auto refused = prepareBoxDir(box_, BoxIds{0, 0});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument);
}

TEST_F(BoxDirTest, BackingChainOfQcow2Overlays) {
  if (!sys::findExecutable("qemu-img")) GTEST_SKIP() << "qemu-img is not installed";
  std::ofstream(root_ / "base.img") << std::string(1 << 20, '\0');
  ASSERT_TRUE(sys::runCapture({"qemu-img", "create", "-q", "-f", "qcow2", "-b",
                               (root_ / "base.img").string(), "-F", "raw",
                               (root_ / "mid.qcow2").string()}));
  // A relative backing name is resolved against the overlay's own directory.
  ASSERT_TRUE(sys::runCapture({"qemu-img", "create", "-q", "-f", "qcow2", "-b", "../mid.qcow2",
                               "-F", "qcow2", (box_ / "top.qcow2").string()}));
  auto chain = qcow2BackingChain(box_ / "top.qcow2");
  ASSERT_TRUE(chain) << chain.error().describe();
  EXPECT_EQ(*chain, (std::vector<fs::path>{root_ / "mid.qcow2", root_ / "base.img"}));
  auto raw = qcow2BackingChain(root_ / "base.img");
  ASSERT_TRUE(raw);
  EXPECT_TRUE(raw->empty());
  EXPECT_FALSE(qcow2BackingChain(root_ / "missing.qcow2"));
}

TEST_F(BoxDirTest, ReclaimGivesEverythingBackToRootAndDropsPlantedLinks) {
  if (::geteuid() != 0) GTEST_SKIP() << "Needs root to chown";
  ASSERT_TRUE(prepareBoxDir(box_, ids_));
  // What a box's uid may leave behind: links to host files and FIFOs.
  fs::create_symlink("/etc/shadow", box_ / "console.log");
  ASSERT_EQ(::mkfifo((box_ / "snapshots" / "fifo").c_str(), 0600), 0);
  ASSERT_TRUE(reclaimBoxDir(box_)) << reclaimBoxDir(box_).error().describe();
  EXPECT_EQ(statOf(box_).st_uid, 0U);
  EXPECT_EQ(statOf(box_).st_mode & 07777, 0700U);
  EXPECT_EQ(statOf(box_ / "disk.qcow2").st_uid, 0U);
  EXPECT_EQ(statOf(box_ / "disk.qcow2").st_gid, 0U);
  EXPECT_EQ(statOf(box_ / "snapshots" / "state").st_uid, 0U);
  EXPECT_FALSE(fs::exists(fs::symlink_status(box_ / "console.log")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(box_ / "snapshots" / "fifo")));
  EXPECT_EQ(statOf("/etc/shadow").st_uid, 0U);
  // And the box gets it again at its next start.
  ASSERT_TRUE(prepareBoxDir(box_, ids_));
  EXPECT_EQ(statOf(box_ / "disk.qcow2").st_uid, ids_.uid);
}

TEST_F(BoxDirTest, BackingFilesMustBeHutchLayers) {
  fs::create_directories(root_ / "layers");
  std::ofstream(root_ / "layers" / "a1.qcow2") << "layer";
  std::ofstream(root_ / "layers" / "notes.txt") << "x";
  fs::create_symlink(root_ / "layers" / "a1.qcow2", box_ / "link.qcow2");
  std::vector<std::string> allowed = {globLiteral(root_ / "layers") + "/*.qcow2",
                                      globLiteral(root_ / "box") + "/snapshots/state"};
  auto good = checkBackingFiles(
      {root_ / "layers" / "a1.qcow2", box_ / "snapshots" / "state", box_ / "link.qcow2"}, allowed);
  ASSERT_TRUE(good) << good.error().describe();
  EXPECT_EQ(good->back(), root_ / "layers" / "a1.qcow2");  // resolved
  for (const fs::path& bad : {fs::path("/etc/shadow"), root_ / "layers" / "notes.txt",
                              box_ / "disk.qcow2", root_ / "layers" / ".." / "box" / "qemu.log"}) {
    auto refused = checkBackingFiles({root_ / "layers" / "a1.qcow2", bad}, allowed);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().code(), Errc::kFailedPrecondition);
  }
  // '*' does not cross directories.
  fs::create_directories(root_ / "layers" / "sub");
  std::ofstream(root_ / "layers" / "sub" / "b.qcow2") << "x";
  EXPECT_FALSE(checkBackingFiles({root_ / "layers" / "sub" / "b.qcow2"}, allowed));
  EXPECT_EQ(globLiteral("/var/lib/h[u]tch*/x?"), "/var/lib/h\\[u\\]tch\\*/x\\?");
}

TEST_F(BoxDirTest, BackingChainOfAFifoIsAnError) {
  ASSERT_EQ(::mkfifo((box_ / "fifo.qcow2").c_str(), 0600), 0);
  EXPECT_FALSE(qcow2BackingChain(box_ / "fifo.qcow2"));
}

}  // namespace
}  // namespace hutch::jail

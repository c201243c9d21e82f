#include "image/root_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "image/test_tar.h"

namespace hutch::image {
namespace {

using testing::snapshot;
using testing::TempDir;

std::string readHost(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A tree at tmp/root with hostile symlinks, and tmp/sentinel beside it that must never change.
class RootDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = tmp_.path() / "root";
    sentinel_ = tmp_.path() / "sentinel";
    std::filesystem::create_directories(host_);
    std::filesystem::create_directories(sentinel_ / "dir");
    std::ofstream(sentinel_ / "passwd") << "root:x:0:0\n";
    std::ofstream(sentinel_ / "dir" / "f") << "keep\n";
    std::filesystem::create_symlink("/", host_ / "slash");
    std::filesystem::create_symlink("../../../../..", host_ / "up");
    std::filesystem::create_symlink(sentinel_, host_ / "abs");
    std::filesystem::create_symlink("../sentinel", host_ / "rel");
    std::filesystem::create_symlink("../sentinel/passwd", host_ / "pw");
    before_ = snapshot(sentinel_);
    auto root = RootDir::open(host_);
    ASSERT_TRUE(root) << root.error().message();
    root_.emplace(std::move(*root));
  }
  void TearDown() override { EXPECT_EQ(snapshot(sentinel_), before_); }

  TempDir tmp_;
  std::filesystem::path host_;
  std::filesystem::path sentinel_;
  std::string before_;
  std::optional<RootDir> root_;
};

TEST(RootDirCleanTest, CleansLexically) {
  EXPECT_EQ(RootDir::cleanPath(""), "");
  EXPECT_EQ(RootDir::cleanPath("/"), "");
  EXPECT_EQ(RootDir::cleanPath("./"), "");
  EXPECT_EQ(RootDir::cleanPath("/usr/bin/x"), "usr/bin/x");
  EXPECT_EQ(RootDir::cleanPath("usr//bin/./x/"), "usr/bin/x");
  EXPECT_EQ(RootDir::cleanPath("../../etc/x"), "etc/x");
  EXPECT_EQ(RootDir::cleanPath("a/b/../../../c"), "c");
  EXPECT_EQ(RootDir::cleanPath("a/.."), "");
}

TEST_F(RootDirTest, WritesAndReads) {
  ASSERT_TRUE(root_->mkdirAll("/usr/local/bin", 0755));
  ASSERT_TRUE(root_->mkdirAll("usr/local/bin"));
  ASSERT_TRUE(root_->writeFile("/usr/local/bin/tool", "#!/bin/sh\n", 04755, 12, 34));
  EXPECT_EQ(readHost(host_ / "usr/local/bin/tool"), "#!/bin/sh\n");
  auto st = root_->lstat("usr/local/bin/tool");
  ASSERT_TRUE(st && *st);
  EXPECT_EQ((*st)->st_mode & 07777, 04755u);
  EXPECT_EQ((*st)->st_uid, 12u);
  EXPECT_EQ((*st)->st_gid, 34u);
  EXPECT_FALSE(*root_->lstat("missing/x"));
  EXPECT_FALSE(*root_->lstat("usr/local/bin/tool/x"));
  // Replaced, not written through: a second name of the file keeps the old contents.
  ASSERT_TRUE(root_->hardlink("/usr/local/bin/tool", "/tool2"));
  ASSERT_TRUE(root_->writeFile("usr/local/bin/tool", "new"));
  EXPECT_EQ(readHost(host_ / "tool2"), "#!/bin/sh\n");
  EXPECT_EQ(root_->mkdirAll("usr/local/bin/tool/x").error().code(), Errc::kFailedPrecondition);
  EXPECT_EQ(root_->mkdir("tool2", 0755).error().code(), Errc::kFailedPrecondition);
  EXPECT_EQ(root_->writeFile("usr", "x").error().code(), Errc::kFailedPrecondition);
  EXPECT_EQ(root_->writeFile("/", "x").error().code(), Errc::kInvalidArgument);
}

TEST_F(RootDirTest, SymlinksResolveInsideTheTree) {
  // Each link points out of the tree on the host; through RootDir it points into the tree.
  ASSERT_TRUE(root_->mkdirAll("slash/etc"));
  ASSERT_TRUE(root_->writeFile("slash/etc/passwd", "image"));
  EXPECT_EQ(readHost(host_ / "etc/passwd"), "image");
  ASSERT_TRUE(root_->mkdirAll("up/sentinel"));
  ASSERT_TRUE(root_->writeFile("up/sentinel/passwd", "image2"));
  EXPECT_EQ(readHost(host_ / "sentinel/passwd"), "image2");
  ASSERT_TRUE(root_->writeFile("rel/passwd", "image3"));  // rel -> ../sentinel -> /sentinel
  EXPECT_EQ(readHost(host_ / "sentinel/passwd"), "image3");
  EXPECT_FALSE(root_->writeFile("abs/passwd", "x"));  // /tmp/... does not exist in the tree
  EXPECT_TRUE(root_->writeFile("../../sentinel/new", "image4"));
  EXPECT_EQ(readHost(host_ / "sentinel/new"), "image4");
  // The last component is never followed: pw is replaced, chmod/chown/utimes touch the link.
  ASSERT_TRUE(root_->chmod("pw", 0600));
  ASSERT_TRUE(root_->chown("pw", 5, 5));
  ASSERT_TRUE(root_->utimens("pw", {1, 0}, {1, 0}));
  EXPECT_EQ(root_->setXattr("pw", "user.x", "y").error().code(), Errc::kUnsupported);
  struct stat st {};
  ASSERT_EQ(::lstat((host_ / "pw").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 5u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1);
  ASSERT_TRUE(root_->writeFile("pw", "replaced"));
  EXPECT_FALSE(std::filesystem::is_symlink(host_ / "pw"));
  // Hard links resolve their target inside the tree too.
  auto link = root_->hardlink("../sentinel/dir/f", "h");
  ASSERT_FALSE(link);
  EXPECT_EQ(link.error().code(), Errc::kNotFound);
  EXPECT_FALSE(root_->hardlink("abs/passwd", "h"));
  ASSERT_TRUE(root_->hardlink("rel/passwd", "h"));  // the tree's /sentinel/passwd
  EXPECT_EQ(readHost(host_ / "h"), "image3");
  // A hard link to a symlink links the symlink.
  ASSERT_TRUE(root_->hardlink("abs", "abs2"));
  EXPECT_TRUE(std::filesystem::is_symlink(host_ / "abs2"));
  EXPECT_EQ(root_->hardlink("sentinel", "d").error().code(), Errc::kFailedPrecondition);
}

TEST_F(RootDirTest, RemovesWithoutFollowing) {
  ASSERT_TRUE(root_->mkdirAll("d/sub"));
  std::filesystem::create_symlink(sentinel_, host_ / "d/sub/out");
  std::filesystem::create_symlink(sentinel_ / "dir", host_ / "d/out2");
  ASSERT_TRUE(root_->writeFile("d/sub/f", "x"));
  ASSERT_TRUE(root_->remove("d"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "d"));
  ASSERT_TRUE(root_->remove("d"));         // missing is fine
  ASSERT_TRUE(root_->remove("nope/x/y"));  // so is a missing parent
  ASSERT_TRUE(root_->remove("abs"));       // the link, not its target
  EXPECT_FALSE(std::filesystem::is_symlink(host_ / "abs"));
  ASSERT_TRUE(root_->remove("rel/passwd"));  // nothing: the tree has no /sentinel
  EXPECT_EQ(root_->remove("/").error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(root_->remove("a/../..").error().code(), Errc::kInvalidArgument);
}

TEST_F(RootDirTest, RemoveChildrenKeeps) {
  ASSERT_TRUE(root_->mkdirAll("d/keep/deeper"));
  ASSERT_TRUE(root_->mkdirAll("d/gone/deeper"));
  ASSERT_TRUE(root_->writeFile("d/keep/new", "1"));
  ASSERT_TRUE(root_->writeFile("d/keep/old", "1"));
  ASSERT_TRUE(root_->writeFile("d/file", "1"));
  ASSERT_TRUE(root_->symlink("/", "d/link"));
  ASSERT_TRUE(root_->removeChildren(
      "d", [](const std::string& p) { return p == "d/keep" || p == "d/keep/new"; }));
  EXPECT_TRUE(std::filesystem::exists(host_ / "d/keep/new"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "d/keep/old"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "d/keep/deeper"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "d/gone"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "d/file"));
  EXPECT_FALSE(std::filesystem::is_symlink(host_ / "d/link"));
  EXPECT_EQ(root_->removeChildren("rel").error().code(), Errc::kFailedPrecondition);
  EXPECT_EQ(root_->removeChildren("missing").error().code(), Errc::kNotFound);
}

TEST_F(RootDirTest, Metadata) {
  ASSERT_TRUE(root_->writeFile("f", "x", 0600));
  ASSERT_TRUE(root_->mkfifo("fifo", 0640));
  ASSERT_TRUE(root_->chmod("f", 02755));
  ASSERT_TRUE(root_->chmod("/", 0755));
  ASSERT_TRUE(root_->chown("/", 0, 0));
  ASSERT_TRUE(root_->utimens("/", {7, 0}, {7, 0}));
  ASSERT_TRUE(root_->utimens("f", {8, 5}, {9, 6}));
  struct stat st {};
  ASSERT_EQ(::lstat((host_ / "f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 02755u);
  EXPECT_EQ(st.st_mtim.tv_sec, 9);
  EXPECT_EQ(st.st_mtim.tv_nsec, 6);
  ASSERT_EQ(::lstat(host_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, 7);
  ASSERT_EQ(::lstat((host_ / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  auto x = root_->setXattr("f", "user.hutch", "v");
  if (x) {
    char buf[8] = {};
    EXPECT_EQ(::getxattr((host_ / "f").c_str(), "user.hutch", buf, sizeof buf), 1);
  } else {
    EXPECT_EQ(x.error().sysErrno(), ENOTSUP);
  }
  EXPECT_TRUE(root_->symlink("../../x", "s"));
  EXPECT_EQ(std::filesystem::read_symlink(host_ / "s"), "../../x");
  EXPECT_FALSE(root_->symlink("", "s2"));
  EXPECT_FALSE(root_->writeFile(std::string_view("a\0b", 3), "x"));
}

TEST_F(RootDirTest, CopiesAHostTree) {
  TempDir src;
  std::filesystem::create_directories(src.path() / "kernel/drivers");
  std::ofstream(src.path() / "kernel/drivers/virtio.ko") << "module";
  std::ofstream(src.path() / "modules.dep") << "dep";
  std::filesystem::permissions(src.path() / "modules.dep", std::filesystem::perms(0600));
  std::filesystem::create_symlink("kernel", src.path() / "link");
  ASSERT_TRUE(root_->copyTreeFrom(src.path(), "/slash/lib/modules/6.1.0"));
  auto base = host_ / "lib/modules/6.1.0";
  EXPECT_EQ(readHost(base / "kernel/drivers/virtio.ko"), "module");
  EXPECT_EQ(std::filesystem::status(base / "modules.dep").permissions(),
            std::filesystem::perms(0600));
  EXPECT_EQ(std::filesystem::read_symlink(base / "link"), "kernel");
  ::mkfifo((src.path() / "fifo").c_str(), 0600);
  EXPECT_EQ(root_->copyTreeFrom(src.path(), "again").error().code(), Errc::kUnsupported);
}

}  // namespace
}  // namespace hutch::image

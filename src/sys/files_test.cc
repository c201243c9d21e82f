#include "sys/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hutch::sys {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-files-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(FilesTest, WriteAtomicThenRead) {
  ASSERT_TRUE(writeFileAtomic(dir_ / "a", "hello\n"));
  ASSERT_TRUE(writeFileAtomic(dir_ / "a", "world\n"));
  EXPECT_EQ(*readFile(dir_ / "a"), "world\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
  EXPECT_FALSE(readFile(dir_ / "a", 3));
  auto missing = readFile(dir_ / "missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kNotFound);
}

TEST_F(FilesTest, TailStartsAtALine) {
  ASSERT_TRUE(writeFileAtomic(dir_ / "log", "first line\nsecond line\nthird\n"));
  EXPECT_EQ(*readTail(dir_ / "log", 14), "third\n");
  EXPECT_EQ(*readTail(dir_ / "log", 1000), "first line\nsecond line\nthird\n");
}

TEST_F(FilesTest, AppendKeepsContent) {
  for (const char* text : {"a\n", "b\n"}) {
    auto fd = openForAppend(dir_ / "log");
    ASSERT_TRUE(fd);
    ASSERT_EQ(::write(fd->get(), text, 2), 2);
  }
  EXPECT_EQ(*readFile(dir_ / "log"), "a\nb\n");
}

// Box directories belong to the box's uid: whatever hutchd opens there may have been replaced.
TEST_F(FilesTest, NothingFollowsASymlink) {
  ASSERT_TRUE(writeFileAtomic(dir_ / "secret", "root only\n"));
  std::filesystem::create_symlink(dir_ / "secret", dir_ / "qemu.log");
  auto read = readFile(dir_ / "qemu.log");
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().sysErrno(), ELOOP);
  EXPECT_FALSE(readTail(dir_ / "qemu.log", 100));
  EXPECT_FALSE(openForAppend(dir_ / "qemu.log"));
  EXPECT_EQ(*readFile(dir_ / "secret"), "root only\n");
}

TEST_F(FilesTest, AtomicWriteReplacesAPlantedTemporary) {
  // The temporary's name is predictable; a symlink there must not be written through.
  std::filesystem::path target = dir_ / "qemu.pid";
  std::filesystem::path tmp = target;
  tmp += ".tmp." + std::to_string(::getpid());
  ASSERT_TRUE(writeFileAtomic(dir_ / "victim", "intact\n"));
  std::filesystem::create_symlink(dir_ / "victim", tmp);
  ASSERT_TRUE(writeFileAtomic(target, "42\n"));
  EXPECT_EQ(*readFile(target), "42\n");
  EXPECT_EQ(*readFile(dir_ / "victim"), "intact\n");
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(tmp)));
  // A symlink at the target itself is replaced, not followed.
  std::filesystem::remove(target);
  std::filesystem::create_symlink(dir_ / "victim", target);
  ASSERT_TRUE(writeFileAtomic(target, "43\n"));
  EXPECT_FALSE(std::filesystem::is_symlink(target));
  EXPECT_EQ(*readFile(dir_ / "victim"), "intact\n");
}

TEST_F(FilesTest, AFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "console.log").c_str(), 0600), 0);
  auto read = readFile(dir_ / "console.log");
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code(), Errc::kInvalidArgument);
  EXPECT_FALSE(readTail(dir_ / "console.log", 100));
  EXPECT_FALSE(openForAppend(dir_ / "console.log"));
}

TEST_F(FilesTest, LinkFileLinksOnlyRegularFiles) {
  ASSERT_TRUE(writeFileAtomic(dir_ / "disk.qcow2", "layer"));
  ASSERT_TRUE(linkFile(dir_ / "disk.qcow2", dir_ / "layer.qcow2"));
  struct stat a {
  }, b{};
  ASSERT_EQ(::stat((dir_ / "disk.qcow2").c_str(), &a), 0);
  ASSERT_EQ(::stat((dir_ / "layer.qcow2").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(b.st_nlink, 2U);
  std::filesystem::create_symlink("/etc/passwd", dir_ / "evil.qcow2");
  EXPECT_FALSE(linkFile(dir_ / "evil.qcow2", dir_ / "layer2.qcow2"));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(dir_ / "layer2.qcow2")));
  EXPECT_FALSE(linkFile(dir_ / "disk.qcow2", dir_ / "layer.qcow2"));  // the name is taken
}

TEST_F(FilesTest, FreezeFileMakesItRootsAndReadOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "freezeFile gives files to root: needs root";
  ASSERT_TRUE(writeFileAtomic(dir_ / "layer", "frozen", 0600));
  ASSERT_EQ(::chown((dir_ / "layer").c_str(), 65534, 65534), 0);
  ASSERT_TRUE(freezeFile(dir_ / "layer"));
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "layer").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);
  EXPECT_EQ(st.st_gid, 0U);
  EXPECT_EQ(st.st_mode & 07777, 0444U);
  std::filesystem::create_symlink(dir_ / "other", dir_ / "link");
  ASSERT_TRUE(writeFileAtomic(dir_ / "other", "x", 0600));
  EXPECT_FALSE(freezeFile(dir_ / "link"));
  ASSERT_EQ(::stat((dir_ / "other").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600U);
}

}  // namespace
}  // namespace hutch::sys

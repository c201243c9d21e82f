// The blocking file operations called directly (the protocol around them is tested through the
// real agent in server_files_test.cc and src/guest/agent_client_files_test.cc).
#include "agent/files/file_ops.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hutch::agent {
namespace {

namespace fs = std::filesystem;

class FileOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hutch-fileops-XXXXXX";
    ASSERT_TRUE(::mkdtemp(dir));
    dir_ = dir;
    ctx_.user = "tester";
    ctx_.users = std::make_shared<const UserDb>(UserDb::parse("", ""));
    ctx_.stop = &stop_;
  }
  void TearDown() override { fs::remove_all(dir_); }

  void touch(const std::string& path, const std::string& content = "") {
    std::ofstream(path, std::ios::binary) << content;
  }

  std::string dir_;
  std::atomic<bool> stop_{false};
  FileContext ctx_;
};

TEST_F(FileOpsTest, AHugeDirectoryCostsOnlyWhatIsShown) {
  for (int i = 999; i >= 0; --i) touch(dir_ + "/" + std::to_string(10000 + i));
  auto list = listDirectory(ctx_, dir_, 1, 10);
  ASSERT_TRUE(list) << list.error().describe();
  ASSERT_EQ(list->entries.size(), 10u);
  EXPECT_TRUE(list->truncated);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(list->entries[i].name, std::to_string(10000 + i));
}

TEST_F(FileOpsTest, LongOperationsStopWhenTheAgentStops) {
  for (int i = 0; i < 600; ++i) touch(dir_ + "/" + std::to_string(i));
  stop_ = true;
  auto list = listDirectory(ctx_, dir_, 1, 10000);
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().code(), Errc::kCancelled);
  auto removed = removePath(ctx_, dir_, true);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code(), Errc::kCancelled);
  EXPECT_TRUE(fs::exists(dir_ + "/599") || fs::exists(dir_ + "/0"));
}

TEST_F(FileOpsTest, ADeepTreeIsRemoved) {
  std::string path = dir_ + "/deep";
  for (int i = 0; i < 200; ++i) path += "/d";
  fs::create_directories(path);
  touch(path + "/leaf");
  ASSERT_TRUE(removePath(ctx_, dir_ + "/deep", true));
  EXPECT_FALSE(fs::exists(dir_ + "/deep"));
}

TEST_F(FileOpsTest, WritesGoThroughATemporaryFileThatADiscardRemoves) {
  touch(dir_ + "/t", "old");
  ::chmod((dir_ + "/t").c_str(), 0604);
  PendingWrite write;
  ASSERT_TRUE(beginWrite(ctx_, write, dir_ + "/t", false));
  EXPECT_EQ(write.path, dir_ + "/t");
  ASSERT_FALSE(write.temp_name.empty());
  EXPECT_TRUE(fs::exists(dir_ + "/" + write.temp_name));
  EXPECT_EQ(fs::status(dir_ + "/" + write.temp_name).permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_TRUE(writeChunk(ctx_, write, "new"));
  const std::string temp = write.temp_name;
  discardWrite(write);
  discardWrite(write);  // idempotent
  EXPECT_FALSE(fs::exists(dir_ + "/" + temp));
  std::ifstream in(dir_ + "/t");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "old");

  PendingWrite second;
  ASSERT_TRUE(beginWrite(ctx_, second, dir_ + "/t", false));
  ASSERT_TRUE(writeChunk(ctx_, second, "newer"));
  auto info = commitWrite(ctx_, second, WriteAttributes{});
  ASSERT_TRUE(info) << info.error().describe();
  EXPECT_EQ(info->mode, 0604u);
  EXPECT_EQ(info->size, 5u);
  discardWrite(second);  // after a commit: nothing to remove
  EXPECT_TRUE(fs::exists(dir_ + "/t"));
  int temps = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    temps += entry.path().filename().string().find(".hutch-") != std::string::npos;
  }
  EXPECT_EQ(temps, 0);
}

TEST_F(FileOpsTest, ALongNameStillGetsATemporaryFile) {
  const std::string name(255, 'n');
  PendingWrite write;
  ASSERT_TRUE(beginWrite(ctx_, write, dir_ + "/" + name, false));
  EXPECT_LE(write.temp_name.size(), 255u);
  ASSERT_TRUE(commitWrite(ctx_, write, WriteAttributes{}));
  EXPECT_TRUE(fs::exists(dir_ + "/" + name));
}

// A recursive remove stops at another filesystem: what is mounted below stays.
TEST_F(FileOpsTest, ARecursiveRemoveDoesNotCrossFilesystems) {
  if (::geteuid() != 0) GTEST_SKIP() << "Needs root to mount";
  fs::create_directories(dir_ + "/tree/mnt");
  touch(dir_ + "/tree/file");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A mount namespace of its own: the host never sees the mount.
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", (dir_ + "/tree/mnt").c_str(), "tmpfs", 0, "size=1m") != 0) {
      ::_exit(77);
    }
    touch(dir_ + "/tree/mnt/inside");
    auto removed = removePath(ctx_, dir_ + "/tree", true);
    const bool refused = !removed && removed.error().code() == Errc::kFailedPrecondition &&
                         removed.error().message().find("/tree/mnt") != std::string::npos;
    ::_exit(refused && fs::exists(dir_ + "/tree/mnt/inside") ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "Cannot mount a tmpfs here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A full disk is resource_exhausted, and the discarded write leaves nothing.
TEST_F(FileOpsTest, AFullDiskIsResourceExhausted) {
  if (::geteuid() != 0) GTEST_SKIP() << "Needs root to mount";
  fs::create_directories(dir_ + "/small");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", (dir_ + "/small").c_str(), "tmpfs", 0, "size=64k") != 0) {
      ::_exit(77);
    }
    PendingWrite write;
    if (!beginWrite(ctx_, write, dir_ + "/small/big", false)) ::_exit(2);
    auto written = writeChunk(ctx_, write, std::string(1 << 20, 'x'));
    const bool full = !written && written.error().code() == Errc::kResourceExhausted &&
                      written.error().message().rfind("The disk is full", 0) == 0;
    discardWrite(write);
    ::_exit(full && fs::is_empty(dir_ + "/small") ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "Cannot mount a tmpfs here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(FileOpsTest, DirectoriesAWriteMakesBelongToTheFilesOwner) {
  // As root (the agent in a box) they can go to anyone; otherwise to the caller itself.
  const bool root = ::geteuid() == 0;
  WriteAttributes attributes;
  attributes.uid = root ? 4321 : ::getuid();
  attributes.gid = root ? 8765 : ::getgid();
  ::mkdir((dir_ + "/there").c_str(), 0700);
  const std::string path = dir_ + "/there/new/deeper/f";
  PendingWrite write;
  auto begun = beginWrite(ctx_, write, path, true, attributes);
  ASSERT_TRUE(begun) << begun.error().describe();
  for (const char* made : {"/there/new", "/there/new/deeper"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir_ + made).c_str(), &st), 0) << made;
    EXPECT_EQ(st.st_uid, *attributes.uid) << made;
    EXPECT_EQ(st.st_gid, *attributes.gid) << made;
    EXPECT_EQ(st.st_mode & 07777, 0755u) << made;
  }
  // What was there already keeps its owner and mode.
  struct stat there {};
  ASSERT_EQ(::stat((dir_ + "/there").c_str(), &there), 0);
  EXPECT_EQ(there.st_uid, ::getuid());
  EXPECT_EQ(there.st_mode & 07777, 0700u);
  discardWrite(write);
  // Without an owner named, nothing is given away.
  PendingWrite plain;
  ASSERT_TRUE(beginWrite(ctx_, plain, dir_ + "/other/f", true));
  struct stat other {};
  ASSERT_EQ(::stat((dir_ + "/other").c_str(), &other), 0);
  EXPECT_EQ(other.st_uid, ::geteuid());
  discardWrite(plain);
}

}  // namespace
}  // namespace hutch::agent

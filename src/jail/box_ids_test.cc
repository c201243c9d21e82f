#include "jail/box_ids.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

namespace hutch::jail {
namespace {

TEST(BoxIdsTest, BasePlusIndex) {
  auto first = boxIds(0);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->uid, kDefaultIdBase);
  EXPECT_EQ(first->gid, kDefaultIdBase);
  auto last = boxIds(kMaxBoxIndex);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->uid, kDefaultIdBase + kMaxBoxIndex);
  // The whole range stays below 2^31, where some tools see negative ids.
  EXPECT_LT(uint64_t{last->uid}, uint64_t{1} << 31);
  auto custom = boxIds(7, 3000000);
  ASSERT_TRUE(custom);
  EXPECT_EQ(custom->uid, 3000007U);
}

TEST(BoxIdsTest, OutOfRangeIsAnError) {
  auto bad = boxIds(kMaxBoxIndex + 1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), Errc::kInvalidArgument);
  EXPECT_FALSE(boxIds(0, 1000));        // would overlap regular users
  EXPECT_FALSE(boxIds(0, 0x7FFFFFFF));  // would cross 2^31
}

TEST(BoxIdsTest, FirstFreeIndexFillsGaps) {
  EXPECT_EQ(*firstFreeIndex({}), 0U);
  EXPECT_EQ(*firstFreeIndex({0, 1, 2}), 3U);
  EXPECT_EQ(*firstFreeIndex({2, 0, 3}), 1U);
  EXPECT_EQ(*firstFreeIndex({1, 1, 5}), 0U);
  std::vector<uint32_t> all;
  for (uint32_t i = 0; i <= kMaxBoxIndex; ++i) all.push_back(i);
  auto full = firstFreeIndex(all);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code(), Errc::kFailedPrecondition);
}

TEST(BoxIdsTest, FindsProcessesByUid) {
  auto mine = processesWithUid(::getuid());
  ASSERT_TRUE(mine);
  EXPECT_NE(std::find(mine->begin(), mine->end(), ::getpid()), mine->end());
  auto nobody = processesWithUid(kDefaultIdBase + kMaxBoxIndex);
  ASSERT_TRUE(nobody);
  EXPECT_TRUE(nobody->empty());
}

TEST(BoxIdsTest, ZombiesDoNotCount) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Not reaped yet: a zombie with our uid.
  for (int i = 0; i < 200; ++i) {
    std::ifstream status("/proc/" + std::to_string(child) + "/status");
    std::string text((std::istreambuf_iterator<char>(status)), std::istreambuf_iterator<char>());
    if (text.find("State:\tZ") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto mine = processesWithUid(::getuid());
  ASSERT_TRUE(mine);
  EXPECT_EQ(std::find(mine->begin(), mine->end(), child), mine->end());
  ::waitpid(child, nullptr, 0);
}

TEST(BoxIdsTest, EachStateDirectoryHasARangeOfItsOwnByDefault) {
  EXPECT_EQ(defaultIdBase("/var/lib/hutch"), kDefaultIdBase);
  EXPECT_EQ(defaultIdBase("/var/lib/hutch/"), kDefaultIdBase);
  const uint32_t other = defaultIdBase("/srv/hutch-b");
  EXPECT_NE(other, kDefaultIdBase);
  EXPECT_EQ(defaultIdBase("/srv/hutch-b"), other);  // the same every time
  EXPECT_EQ((other - kDefaultIdBase) % 65536, 0U);
  // Above the test harnesses' ranges (slots 1..512), below systemd's foreign range.
  EXPECT_GE(other, kDefaultIdBase + 513U * 65536U);
  EXPECT_LT(other + kMaxBoxIndex, 0x7FFE0000U);
  EXPECT_TRUE(boxIds(kMaxBoxIndex, other));
  // When a range is taken, the next one; the last wraps to the first.
  EXPECT_EQ(nextIdBase(other), other + 65536U == kDefaultIdBase + 1013U * 65536U
                                   ? kDefaultIdBase + 513U * 65536U
                                   : other + 65536U);
  EXPECT_EQ(nextIdBase(kDefaultIdBase + 1012U * 65536U), kDefaultIdBase + 513U * 65536U);
  // Ten directories: not all in one range.
  std::set<uint32_t> bases;
  for (int i = 0; i < 10; ++i) bases.insert(defaultIdBase("/tmp/state-" + std::to_string(i)));
  EXPECT_GT(bases.size(), 5U);
}

// What lockIdRange(base) says in a new process: 0 taken, 1 held by another, 2 anything else.
int lockInAChild(uint32_t base, const std::filesystem::path& dir) {
  pid_t pid = ::fork();
  if (pid == 0) {
    auto lock = lockIdRange(base, dir);
    if (lock) ::_exit(0);
    const bool held = lock.error().code() == Errc::kFailedPrecondition &&
                      lock.error().describe().find("another hutchd") != std::string::npos;
    ::_exit(held ? 1 : 2);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(BoxIdsTest, ARangeIsLockedByOneProcessAtATime) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hutch-range-locks-" + std::to_string(::getpid()));
  {
    auto first = lockIdRange(0x7C400000, dir);
    ASSERT_TRUE(first) << first.error().describe();
    EXPECT_EQ(lockInAChild(0x7C400000, dir), 1) << "held by this process";
    EXPECT_EQ(lockInAChild(0x7C410000, dir), 0) << "another range is free";
  }
  EXPECT_EQ(lockInAChild(0x7C400000, dir), 0) << "free again once the holder closed it";
  std::filesystem::remove_all(dir);
}

TEST(BoxIdsTest, AChildOfTheHolderDoesNotHoldItsRange) {
  // A hutchd killed while a child it forked had not yet run exec: the child has the lock's
  // descriptor for a while, and the hutchd restarted at once must still get its range.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hutch-range-child-" + std::to_string(::getpid()));
  auto lock = lockIdRange(0x7C420000, dir);
  ASSERT_TRUE(lock) << lock.error().describe();
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(gate[1]);
    char byte = 0;
    (void)!::read(gate[0], &byte, 1);  // holds every inherited descriptor until told
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  ::close(gate[0]);
  EXPECT_EQ(lockInAChild(0x7C420000, dir), 1) << "the holder is alive";
  lock->reset();  // the holder lets go; its child still has the file
  EXPECT_EQ(lockInAChild(0x7C420000, dir), 0) << "a forked child must not keep the range";
  ::close(gate[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::filesystem::remove_all(dir);
}

TEST(BoxIdsTest, ANewRangeIsNotOneWhoseUidsJailsStillHold) {
  // A stopped hutchd's boxes run on (by design): a hutchd with a new state directory whose hash
  // lands on that range must take another, or its boxes' uids are refused and its start removes
  // their network namespaces.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hutch-range-jails-" + std::to_string(::getpid()));
  ASSERT_TRUE(lockIdRange(0x7C430000, dir));  // makes the directory
  const std::filesystem::path held = dir / ("uid-" + std::to_string(0x7C430000 + 7) + ".lock");
  const std::filesystem::path free = dir / ("uid-" + std::to_string(0x7C430000 + 8) + ".lock");
  const std::filesystem::path other = dir / ("uid-" + std::to_string(0x7C440000) + ".lock");
  UniqueFd jail(::open(held.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_EQ(::flock(jail.get(), LOCK_EX), 0);
  UniqueFd(::open(free.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
  UniqueFd other_jail(::open(other.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_EQ(::flock(other_jail.get(), LOCK_EX), 0);
  {
    auto taken = lockUnusedIdRange(0x7C430000, dir);
    ASSERT_FALSE(taken);
    EXPECT_EQ(taken.error().code(), Errc::kFailedPrecondition);
    EXPECT_NE(taken.error().describe().find(held.string()), std::string::npos)
        << taken.error().describe();
    // A state directory that has used the range takes it: those are its own boxes.
    EXPECT_TRUE(lockIdRange(0x7C430000, dir));
  }
  EXPECT_TRUE(lockUnusedIdRange(0x7C420000, dir)) << "a jail in the range above is not in it";
  jail.reset();
  auto taken = lockUnusedIdRange(0x7C430000, dir);
  EXPECT_TRUE(taken) << taken.error().describe();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hutch::jail

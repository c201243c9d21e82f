#include "jail/box_ids.h"

#include <gtest/gtest.h>
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

TEST(BoxIdsTest, ARangeIsLockedByOneHolderAtATime) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hutch-range-locks-" + std::to_string(::getpid()));
  {
    auto first = lockIdRange(0x7C400000, dir);
    ASSERT_TRUE(first) << first.error().describe();
    auto second = lockIdRange(0x7C400000, dir);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error().code(), Errc::kFailedPrecondition);
    EXPECT_NE(second.error().describe().find("another hutchd"), std::string::npos);
    EXPECT_TRUE(lockIdRange(0x7C410000, dir)) << "another range is free";
  }
  EXPECT_TRUE(lockIdRange(0x7C400000, dir)) << "free again once the holder closed it";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hutch::jail

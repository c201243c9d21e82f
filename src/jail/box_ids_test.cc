#include "jail/box_ids.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
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

}  // namespace
}  // namespace hutch::jail

#include "sys/proc_fs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

namespace hutch::sys {
namespace {

TEST(ProcFsTest, SplitCmdline) {
  using namespace std::string_literals;
  EXPECT_EQ(splitCmdline("a\0b c\0"s), (std::vector<std::string>{"a", "b c"}));
  EXPECT_EQ(splitCmdline("a\0\0b"s), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_TRUE(splitCmdline("").empty());
}

TEST(ProcFsTest, ReadsOwnCmdline) {
  auto args = readCmdline(::getpid());
  ASSERT_TRUE(args);
  ASSERT_FALSE(args->empty());
  EXPECT_NE(args->front().find("sys_test"), std::string::npos);
  EXPECT_EQ(readCmdline(0x3ffffff0).error().code(), Errc::kNotFound);
}

TEST(ProcFsTest, ListsOpenFds) {
  auto fds = listOpenFds();
  ASSERT_TRUE(fds);
  EXPECT_NE(std::find(fds->begin(), fds->end(), 0), fds->end());
}

}  // namespace
}  // namespace hutch::sys

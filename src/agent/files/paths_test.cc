#include "agent/files/paths.h"

#include <gtest/gtest.h>

namespace hutch::agent {
namespace {

TEST(PathsTest, ResolvesAgainstTheHomeAndCleansLikeGo) {
  EXPECT_EQ(resolvePath("a.txt", "/home/hutch"), "/home/hutch/a.txt");
  EXPECT_EQ(resolvePath(".", "/home/hutch"), "/home/hutch");
  EXPECT_EQ(resolvePath("../other/./x/", "/home/hutch"), "/home/other/x");
  EXPECT_EQ(resolvePath("/etc//hosts", "/home/hutch"), "/etc/hosts");
  EXPECT_EQ(resolvePath("/../../x", "/"), "/x");
  EXPECT_EQ(resolvePath("/a/b/../..", "/"), "/");
  EXPECT_EQ(resolvePath("x", "/"), "/x");
  EXPECT_EQ(resolvePath("", "/root"), "/root");
  EXPECT_EQ(resolvePath("...", "/"), "/...");  // only "." and ".." are special
}

TEST(PathsTest, Components) {
  EXPECT_EQ(baseName("/"), "/");
  EXPECT_EQ(baseName("/a"), "a");
  EXPECT_EQ(baseName("/a/b.txt"), "b.txt");
  EXPECT_EQ(parentOf("/"), "/");
  EXPECT_EQ(parentOf("/a"), "/");
  EXPECT_EQ(parentOf("/a/b"), "/a");
  EXPECT_EQ(childPath("/", "a"), "/a");
  EXPECT_EQ(childPath("/a", "b"), "/a/b");
  EXPECT_TRUE(isUnder("/a/b", "/a"));
  EXPECT_TRUE(isUnder("/a", "/a"));
  EXPECT_FALSE(isUnder("/ab", "/a"));
  EXPECT_TRUE(isUnder("/x", "/"));
}

}  // namespace
}  // namespace hutch::agent

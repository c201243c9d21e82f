#include "base/path_text.h"

#include <gtest/gtest.h>

namespace hutch::base {
namespace {

TEST(PathTextTest, DotsAreTakenLexicallyAndNeverClimbAboveTheRoot) {
  EXPECT_EQ(lexicalAbsolute("/a//b/./c/../d/"), "/a/b/d");
  EXPECT_EQ(lexicalAbsolute("a/b"), "/a/b");
  EXPECT_EQ(lexicalAbsolute("/.."), "/");
  EXPECT_EQ(lexicalAbsolute(""), "/");
  EXPECT_EQ(lexicalAbsolute("../../etc/passwd"), "/etc/passwd");
  bool climbed = false;
  EXPECT_EQ(joinParts(lexicalParts("./usr/../etc/x", &climbed), ""), "etc/x");
  EXPECT_FALSE(climbed);
  EXPECT_EQ(joinParts(lexicalParts("a/../../b", &climbed), ""), "b");
  EXPECT_TRUE(climbed);
  EXPECT_EQ(joinParts(lexicalParts("/", &climbed), ""), "");
  EXPECT_FALSE(climbed);
}

}  // namespace
}  // namespace hutch::base

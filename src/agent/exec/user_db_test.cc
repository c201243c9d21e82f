#include "agent/exec/user_db.h"

#include <gtest/gtest.h>

namespace hutch::agent {
namespace {

constexpr const char* kPasswd =
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "# a comment\n"
    "broken line\n"
    "alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n"
    "nohome:x:1001:1001::::\n";
constexpr const char* kGroup =
    "root:x:0:\n"
    "docker:x:998:alice,bob\n"
    "alice:x:1000:\n"
    "audio:x:29:bob,alice\n";

TEST(UserDbTest, ResolvesNamesWithSupplementaryGroups) {
  auto db = UserDb::parse(kPasswd, kGroup);
  auto alice = db.lookup("alice");
  ASSERT_TRUE(alice) << alice.error().message();
  EXPECT_EQ(alice->uid, 1000u);
  EXPECT_EQ(alice->gid, 1000u);
  EXPECT_EQ(alice->home, "/home/alice");
  EXPECT_EQ(alice->groups, (std::vector<gid_t>{1000, 998, 29}));
}

TEST(UserDbTest, EmptyMeansRoot) {
  auto root = UserDb::parse(kPasswd, kGroup).lookup("");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->uid, 0u);
  EXPECT_EQ(root->home, "/root");
  // Even without any passwd file.
  auto bare = UserDb::parse("", "").lookup("");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->name, "root");
  EXPECT_EQ(bare->uid, 0u);
}

TEST(UserDbTest, NumericUidsWithAndWithoutEntries) {
  auto db = UserDb::parse(kPasswd, kGroup);
  auto known = db.lookup("1000");
  ASSERT_TRUE(known);
  EXPECT_EQ(known->name, "alice");
  auto unknown = db.lookup("4242");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->uid, 4242u);
  EXPECT_EQ(unknown->gid, 0u);
  EXPECT_EQ(unknown->home, "/");
  EXPECT_EQ(db.lookup("nohome")->home, "/");
}

TEST(UserDbTest, AnImagesUserFormsResolveWithoutAPasswdFile) {
  // USER root, 1000, 1000:1000, app:staff: what an OCI image's config may say.
  auto bare = UserDb::parse("", "");
  auto root = bare.lookup("root");
  ASSERT_TRUE(root) << "an image need have no /etc/passwd";
  EXPECT_EQ(root->uid, 0u);
  auto pair = bare.lookup("1000:1001");
  ASSERT_TRUE(pair);
  EXPECT_EQ(pair->uid, 1000u);
  EXPECT_EQ(pair->gid, 1001u);
  EXPECT_EQ(pair->groups, (std::vector<gid_t>{1001}));
  auto db = UserDb::parse(kPasswd, kGroup);
  auto named = db.lookup("alice:29");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->uid, 1000u);
  EXPECT_EQ(named->gid, 29u);
  EXPECT_FALSE(db.lookup("alice:nosuchgroup"));
  EXPECT_FALSE(bare.lookup("mallory:0"));
}

TEST(UserDbTest, UnknownNameIsNotFound) {
  auto r = UserDb::parse(kPasswd, kGroup).lookup("mallory");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kNotFound);
  EXPECT_FALSE(UserDb::parse(kPasswd, kGroup).lookup("broken line"));
}

TEST(UserDbTest, NamesOfIdsAndGroups) {
  auto db = UserDb::parse(kPasswd, kGroup);
  EXPECT_EQ(db.userName(1000), "alice");
  EXPECT_EQ(db.userName(4242), "4242");
  EXPECT_EQ(db.groupName(998), "docker");
  EXPECT_EQ(db.groupName(5), "5");
  EXPECT_EQ(*db.lookupGroup("docker"), 998u);
  EXPECT_EQ(*db.lookupGroup("77"), 77u);
  EXPECT_EQ(db.lookupGroup("wheel").error().code(), Errc::kNotFound);
}

}  // namespace
}  // namespace hutch::agent

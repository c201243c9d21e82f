#include "jail/share.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace hutch::jail {
namespace {

ShareSpec spec() {
  return ShareSpec{.name = "b1",
                   .dir = "/home/alice/proj",
                   .read_only = true,
                   .box = BoxIds{0x7C000005, 0x7C000005}};
}

TEST(ShareTest, GuestRootIsTheBoxAndTheGuestUserIsTheOwner) {
  EXPECT_EQ(shareUidMap(spec(), 1007), "0 2080374789 1\n1000 1007 1\n");
  EXPECT_EQ(shareGidMap(spec(), 1008), "0 2080374789 1\n1000 1008 1\n");
}

TEST(ShareTest, CommandLineRoundTrips) {
  std::vector<std::string> argv =
      shareCommand("/usr/lib/hutch/hutch-jail", spec(), {"/usr/lib/qemu/virtiofsd", "--fd=3"});
  ASSERT_GE(argv.size(), 4U);
  EXPECT_EQ(argv[1], "--share");
  auto dashdash = std::find(argv.begin(), argv.end(), "--");
  ASSERT_NE(dashdash, argv.end());
  EXPECT_EQ(*(dashdash + 1), "/usr/lib/qemu/virtiofsd");
  auto parsed = parseShareArgs(std::vector<std::string>(argv.begin() + 2, dashdash));
  ASSERT_TRUE(parsed) << parsed.error().describe();
  EXPECT_EQ(*parsed, spec());
}

TEST(ShareTest, BadArgumentsAreRefused) {
  auto refused = [](std::vector<std::string> args) { return !parseShareArgs(args).has_value(); };
  EXPECT_TRUE(refused({"--dir", "relative", "--box-ids", "5:5"}));
  EXPECT_TRUE(refused({"--dir", "/x", "--box-ids", "0:0"}));  // never root's
  EXPECT_TRUE(refused({"--dir", "/x", "--box-ids", "5"}));
  EXPECT_TRUE(refused({"--dir", "/x"}));
  EXPECT_TRUE(refused({"--dir", "/x", "--box-ids", "5:5", "--bogus", "1"}));
  EXPECT_TRUE(refused({"--dir"}));
}

TEST(ShareTest, OnlyADirectoryOfAnOrdinaryUserIsShared) {
  char tmpl[] = "/tmp/hutch-share-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::filesystem::path dir = tmpl;
  auto missing = checkShareDir(dir / "nope");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().describe().find("does not exist"), std::string::npos);
  std::ofstream(dir / "file") << "x";
  auto file = checkShareDir(dir / "file");
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().describe().find("not a directory"), std::string::npos);
  EXPECT_FALSE(checkShareDir("relative/dir"));
  if (::geteuid() == 0) {
    auto root = checkShareDir(dir);  // mkdtemp as root: root's
    ASSERT_FALSE(root);
    EXPECT_NE(root.error().describe().find("belongs to root"), std::string::npos);
    ASSERT_EQ(::chown(dir.c_str(), 4242, 4242), 0);
  }
  EXPECT_TRUE(checkShareDir(dir)) << checkShareDir(dir).error().describe();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hutch::jail

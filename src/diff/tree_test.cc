// The ext4 reader on real images that mke2fs makes from a directory (mke2fs -d).
#include "diff/tree.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "sys/run.h"

namespace fs = std::filesystem;

namespace hutch::diff {
namespace {

class TreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-diff-tree-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    root_ = dir_ / "root";
    fs::create_directories(root_ / "etc");
    fs::create_directories(root_ / "home/hutch/deep/er");
    write(root_ / "etc/motd", "hello\n");
    write(root_ / "home/hutch/deep/er/big", std::string(300000, 'x'));
    ::chmod((root_ / "etc/motd").c_str(), 0600);
    fs::create_symlink("../etc/motd", root_ / "home/link");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary) << bytes;
  }
  fs::path image() {
    fs::path img = dir_ / "disk.img";
    auto made = sys::runCapture(
        {"mke2fs", "-q", "-F", "-t", "ext4", "-d", root_.string(), img.string(), "16M"});
    EXPECT_TRUE(made) << made.error().describe();
    return img;
  }

  fs::path dir_;
  fs::path root_;
};

TEST_F(TreeTest, WalksEveryEntryWithItsMetadataInPathOrder) {
  auto img = Image::open(image());
  ASSERT_TRUE(img) << img.error().describe();
  auto tree = img->walk();
  ASSERT_TRUE(tree) << tree.error().describe();
  std::vector<std::string> paths;
  for (const auto& e : tree->entries) paths.push_back(e.path);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"/etc", "/etc/motd", "/home", "/home/hutch",
                                      "/home/hutch/deep", "/home/hutch/deep/er",
                                      "/home/hutch/deep/er/big", "/home/link", "/lost+found"}));
  const Entry* motd = tree->find("/etc/motd");
  ASSERT_NE(motd, nullptr);
  EXPECT_EQ(motd->kind, Kind::kFile);
  EXPECT_EQ(motd->size, 6u);
  EXPECT_EQ(motd->mode, 0600u);
  const Entry* link = tree->find("/home/link");
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->kind, Kind::kSymlink);
  EXPECT_EQ(link->target, "../etc/motd");
  EXPECT_EQ(tree->find("/nope"), nullptr);

  auto bytes = img->read(motd->ino, 100);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(*bytes, "hello\n");
  const Entry* big = tree->find("/home/hutch/deep/er/big");
  ASSERT_NE(big, nullptr);
  auto window = img->read(big->ino, 1000, 299500);
  ASSERT_TRUE(window);
  EXPECT_EQ(*window, std::string(500, 'x'));
}

TEST_F(TreeTest, LimitsStopAHugeOrDeepTree) {
  auto img = Image::open(image());
  ASSERT_TRUE(img);
  Limits few;
  few.max_entries = 3;
  auto tree = img->walk(few);
  ASSERT_FALSE(tree);
  EXPECT_EQ(tree.error().code(), Errc::kResourceExhausted);
  Limits shallow;
  shallow.max_depth = 2;
  tree = img->walk(shallow);
  ASSERT_FALSE(tree);
  EXPECT_NE(tree.error().message().find("deeper than 2"), std::string::npos);
}

TEST_F(TreeTest, NotAFilesystemIsAClearError) {
  write(dir_ / "junk", std::string(1 << 20, 'j'));
  auto img = Image::open(dir_ / "junk");
  ASSERT_FALSE(img);
  EXPECT_EQ(img.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(img.error().message().find("no ext4 filesystem"), std::string::npos);
}

}  // namespace
}  // namespace hutch::diff

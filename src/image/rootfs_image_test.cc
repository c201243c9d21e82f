#include "image/rootfs_image.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace hutch::image {
namespace {

namespace fs = std::filesystem;

TEST(RootfsImageTest, ASmallTreeGetsTheMinimumHeadroomRoundedTo64MiB) {
  Ext4Layout layout = ext4LayoutFor({.bytes = 10ull << 20, .files = 1000});
  EXPECT_EQ(layout.image_bytes % (64ull << 20), 0u);
  // 10 MiB of tree + 512 MiB free + overhead.
  EXPECT_GE(layout.image_bytes, (10ull + 512 + 64) << 20);
  EXPECT_LE(layout.image_bytes, 704ull << 20);
  EXPECT_EQ(layout.inodes, ((10ull + 512) << 20) / 16384);
}

TEST(RootfsImageTest, ALargeTreeGetsThirtyPercentAndAnInodeForEveryTwoFiles) {
  Ext4Layout layout = ext4LayoutFor({.bytes = 4ull << 30, .files = 1000000});
  EXPECT_GE(layout.image_bytes, (4ull << 30) * 130 / 100);
  EXPECT_EQ(layout.inodes, 2000000u);
}

TEST(RootfsImageTest, MeasureCountsEntriesAndDoesNotFollowLinks) {
  char tmpl[] = "/tmp/hutch-measure-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  fs::path tree(tmpl);
  fs::create_directories(tree / "a/b");
  std::ofstream(tree / "a/b/file") << std::string(100000, 'x');
  fs::create_directory_symlink("/usr", tree / "usr-link");
  auto size = measureTree(tree);
  ASSERT_TRUE(size) << size.error().describe();
  EXPECT_EQ(size->files, 5u);  // root, a, a/b, a/b/file, usr-link
  EXPECT_GE(size->bytes, 100000u);
  EXPECT_LT(size->bytes, 1u << 20) << "the link to /usr was not followed";
  EXPECT_FALSE(measureTree(tree / "a/b/file"));
  fs::remove_all(tree);
}

TEST(RootfsImageTest, MkfsArgv) {
  MkfsExt4 mkfs{.tree = "/s/tree", .image = "/s/rootfs.img", .inodes = 4096};
  std::vector<std::string> want = {
      "mkfs.ext4", "-q",           "-F",   "-L", "hutch-root",     "-m",
      "1",         "-N",           "4096", "-E", "root_owner=0:0", "-d",
      "/s/tree",   "/s/rootfs.img"};
  EXPECT_EQ(mkfs.render(), want);
}

}  // namespace
}  // namespace hutch::image

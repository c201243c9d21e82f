#include "agent/init/grow_root.h"

#include <gtest/gtest.h>

namespace hutch::agent {
namespace {

std::string superblock(uint32_t log_block, uint32_t blocks_lo, uint32_t blocks_hi, bool is64) {
  std::string sb(1024, '\0');
  auto put32 = [&](size_t off, uint32_t v) {
    for (int i = 0; i < 4; ++i) sb[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  sb[0x38] = static_cast<char>(0x53);
  sb[0x39] = static_cast<char>(0xEF);
  put32(0x04, blocks_lo);
  put32(0x18, log_block);
  put32(0x60, is64 ? 0x80 : 0);
  put32(0x150, blocks_hi);
  return sb;
}

TEST(GrowRootTest, ParsesBlockSizeAndCount) {
  auto g = parseExt4Superblock(superblock(2, 311296, 0, false));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->block_size, 4096u);
  EXPECT_EQ(g->blocks, 311296u);
  g = parseExt4Superblock(superblock(2, 5, 1, true));
  EXPECT_EQ(g->blocks, (uint64_t{1} << 32) + 5);
  // The high word only counts with the 64bit feature.
  EXPECT_EQ(parseExt4Superblock(superblock(2, 5, 1, false))->blocks, 5u);
}

TEST(GrowRootTest, RejectsOtherFilesystemsAndGarbage) {
  std::string sb = superblock(2, 1, 0, false);
  sb[0x38] = 0;
  EXPECT_FALSE(parseExt4Superblock(sb));
  EXPECT_FALSE(parseExt4Superblock("short"));
  EXPECT_FALSE(parseExt4Superblock(superblock(40, 1, 0, false)));
}

}  // namespace
}  // namespace hutch::agent

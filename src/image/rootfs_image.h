// An image's tree made into a template's root disk: a raw ext4 file written by mkfs.ext4 -d,
// sized the way scripts/image/image.sh sizes the recipes' disks (the tree, 30 % or at least
// 512 MiB free, ext4's own overhead, rounded up to 64 MiB). Boxes grow it with --disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::image {

struct TreeSize {
  uint64_t bytes = 0;  // allocated (st_blocks), directories included
  uint64_t files = 0;  // every entry, the root included
  bool operator==(const TreeSize&) const = default;
};

// Walks `tree` without following a symlink or leaving its filesystem.
Result<TreeSize> measureTree(const std::filesystem::path& tree);

struct Ext4Layout {
  uint64_t image_bytes = 0;
  uint64_t inodes = 0;
  bool operator==(const Ext4Layout&) const = default;
};

// Pure: the file size and inode count for a tree of `size`.
Ext4Layout ext4LayoutFor(const TreeSize& size);

// mkfs.ext4 -q -F -L LABEL -m 1 -N INODES -E root_owner=0:0 -d TREE IMAGE (the image file must
// already have its size). mkfs copies the tree with lstat: links are copied as links, never
// followed on the host.
struct MkfsExt4 {
  std::filesystem::path mkfs = "mkfs.ext4";
  std::filesystem::path tree;
  std::filesystem::path image;
  std::string label = "hutch-root";
  uint64_t inodes = 0;
  std::vector<std::string> render() const;
};

}  // namespace hutch::image

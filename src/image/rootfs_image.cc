#include "image/rootfs_image.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace hutch::image {

namespace fs = std::filesystem;

Result<TreeSize> measureTree(const fs::path& tree) {
  struct stat root {};
  if (::lstat(tree.c_str(), &root) != 0 || !S_ISDIR(root.st_mode)) {
    return fail(Errc::kInternal, fmt::format("Cannot measure {}: not a directory", tree.string()));
  }
  TreeSize size{.bytes = static_cast<uint64_t>(root.st_blocks) * 512, .files = 1};
  std::error_code ec;
  fs::recursive_directory_iterator it(tree, fs::directory_options::none, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) {
      return fail(Errc::kInternal,
                  fmt::format("Cannot measure {}: {}", it->path().string(), std::strerror(errno)));
    }
    size.files++;
    size.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    // Never into a mount or through a link (the iterator does not follow links by default).
    if (S_ISDIR(st.st_mode) && st.st_dev != root.st_dev) it.disable_recursion_pending();
  }
  if (ec) {
    return fail(Errc::kInternal, fmt::format("Cannot measure {}: {}", tree.string(), ec.message()));
  }
  return size;
}

Ext4Layout ext4LayoutFor(const TreeSize& size) {
  constexpr uint64_t kMiB = 1ull << 20;
  uint64_t headroom = std::max<uint64_t>(size.bytes * 30 / 100, 512 * kMiB);
  // Inodes: twice what the tree holds, at least mkfs's default ratio (one per 16 KiB).
  uint64_t inodes = std::max<uint64_t>(size.files * 2, (size.bytes + headroom) / 16384);
  // ext4's overhead on top, so the free space is really there: inode tables (256 bytes each),
  // the journal (64 MiB at most at these sizes), bitmaps and descriptors, 1 % for root.
  uint64_t overhead = inodes * 256 + 64 * kMiB + (size.bytes + headroom) / 25;
  uint64_t total = size.bytes + headroom + overhead;
  uint64_t rounded = (total + 64 * kMiB - 1) / (64 * kMiB) * (64 * kMiB);
  return {.image_bytes = rounded, .inodes = inodes};
}

std::vector<std::string> MkfsExt4::render() const {
  return {mkfs.string(),
          "-q",
          "-F",
          "-L",
          label,
          "-m",
          "1",
          "-N",
          std::to_string(inodes),
          "-E",
          "root_owner=0:0",
          "-d",
          tree.string(),
          image.string()};
}

}  // namespace hutch::image

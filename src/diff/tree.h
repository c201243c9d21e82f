// A box's ext4 filesystem, read from an image file with libext2fs: every entry with what
// `hutch diff` compares (docs/diff.md). The image is untrusted (a box's root user wrote it):
// only the hutch-diff helper opens one, sandboxed (sandbox.h), never hutchd.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::diff {

enum class Kind { kFile, kDir, kSymlink, kCharDevice, kBlockDevice, kFifo, kSocket };
// "file", "dir", "symlink", "char-device", "block-device", "fifo", "socket" (the files API's
// vocabulary).
std::string_view kindName(Kind kind);

struct Entry {
  std::string path;  // absolute, "/etc/hosts"; "/" itself is not an entry
  Kind kind = Kind::kFile;
  uint32_t mode = 0;  // permission bits (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint32_t ino = 0;
  uint32_t flags = 0;                 // i_flags
  std::array<uint32_t, 15> blocks{};  // i_block: the extent tree's root, block map or inline data
  std::string target;                 // symlinks: where it points
  bool operator==(const Entry&) const = default;
};

// Bounds on what one walk accepts from a hostile filesystem; past them the walk fails.
struct Limits {
  size_t max_entries = 2'000'000;
  int max_depth = 256;
  size_t max_target = 4096;  // symlink targets
};

// Every entry of a filesystem, sorted by path (byte order), and what the walk skipped.
struct Tree {
  std::vector<Entry> entries;
  std::vector<std::string> notes;  // names that cannot be paths (a '/' in them), loops
  // The entry at `path`, or nullptr.
  const Entry* find(std::string_view path) const;
};

// An ext4 (or ext2/3) filesystem image, open read-only.
class Image {
 public:
  // Opens the filesystem in `file` (a raw image). Fails with kInvalidArgument when it is not one
  // libext2fs can read, or uses a feature hutch diff cannot read correctly (fast_commit).
  static Result<Image> open(const std::filesystem::path& file);
  Image(Image&&) noexcept;
  Image& operator=(Image&&) noexcept;
  ~Image();

  Result<Tree> walk(const Limits& limits = {}) const;
  // Up to `max` bytes of the regular file with inode `ino`, from `offset`; fewer at its end.
  Result<std::string> read(uint32_t ino, size_t max, uint64_t offset = 0) const;
  // Calls `sink` with the whole content of inode `ino`, in pieces.
  Result<> stream(uint32_t ino, const std::function<Result<>(std::string_view)>& sink) const;

 private:
  struct Fs;
  explicit Image(std::unique_ptr<Fs> fs);
  std::unique_ptr<Fs> fs_;
};

}  // namespace hutch::diff

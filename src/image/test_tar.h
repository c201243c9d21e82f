// Test support for image tests: tars built with libarchive's writer, temporary trees, and a
// snapshot of a directory to prove it unchanged.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "image/manifest.h"

namespace hutch::image::testing {

struct TarEntry {
  enum class Kind { kFile, kDir, kSymlink, kHardlink, kFifo, kCharDev };
  std::string name;
  Kind kind = Kind::kFile;
  std::string data;  // kFile
  std::string link;  // kSymlink, kHardlink
  mode_t mode = 0644;
  int64_t uid = 0;
  int64_t gid = 0;
  time_t mtime = 1700000000;
  std::vector<std::pair<std::string, std::string>> xattrs;
};

TarEntry file(std::string name, std::string data, mode_t mode = 0644);
TarEntry dir(std::string name, mode_t mode = 0755);
TarEntry symlink(std::string name, std::string target);
TarEntry hardlink(std::string name, std::string target);

// A pax tar of `entries`, compressed as asked.
std::string makeTar(const std::vector<TarEntry>& entries,
                    Compression compression = Compression::kNone);

// A descriptor for `blob` as a layer (media type, digest and size from it).
Descriptor layerOf(const std::string& blob, Compression compression = Compression::kNone);

// A memfd holding `bytes`.
UniqueFd memfdOf(const std::string& bytes);

// A temporary directory, removed with everything below it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Every entry below `dir` with its type, mode, owner, size, link count, mtime, contents and
// link target: equal snapshots mean nothing there changed.
std::string snapshot(const std::filesystem::path& dir);

}  // namespace hutch::image::testing

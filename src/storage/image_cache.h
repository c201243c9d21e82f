// The image build cache (<cache>/images/<recipe>-<key>/, made by scripts/build-image.sh) and
// what is pruned from it. Builds are keyed by their inputs (the agent's hash among them), so a
// host that builds new sources keeps gaining builds: `hutch image prune` and hutchd's size limit
// remove those nothing uses.
//
// Several hutchd (different state directories) may share one cache. Each records that it uses a
// build in <build>/users/<hash of its state dir> (the state dir's path inside) whenever it starts
// a VM from it, and drops that record when it prunes and finds it no longer uses the build. A
// build another hutchd recorded is kept while that hutchd's state directory exists.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::storage {

struct CachedImage {
  std::filesystem::path dir;
  uint64_t bytes = 0;  // allocated on disk
  // The last VM start from it by any hutchd, or when it was built.
  std::filesystem::file_time_type last_used;
  std::vector<std::string> other_users;  // state directories of other hutchd that use it
};

struct PruneOptions {
  bool dry_run = false;
  // Builds started from (or built) less than this long ago are kept.
  std::chrono::seconds keep{std::chrono::hours(24)};
  // When set: only the least recently used go, until the removable builds and the kept ones
  // together take at most this many bytes (hutchd's automatic prune).
  std::optional<uint64_t> limit_bytes;
};

struct PruneDecision {
  std::filesystem::path dir;
  uint64_t bytes = 0;
  bool remove = false;
  std::string reason;  // why it is kept, or "unused"
};

// What to remove, given what this hutchd uses (canonical build dir -> what uses it). Pure.
std::vector<PruneDecision> planPrune(const std::vector<CachedImage>& images,
                                     const std::map<std::string, std::string>& in_use,
                                     const PruneOptions& options,
                                     std::filesystem::file_time_type now);

class ImageCache {
 public:
  // `root`: the cache (its images/ holds the builds); `state_dir`: this hutchd's.
  ImageCache(const std::filesystem::path& root, const std::filesystem::path& state_dir);

  // Records that this hutchd starts a VM from `image_dir` (best effort: a build outside the
  // cache, or one hutch cannot write, is left alone).
  void markUsed(const std::filesystem::path& image_dir) const;
  // The complete builds (those with a manifest), with the other hutchd that recorded a use.
  // Drops this hutchd's record from builds not in `in_use`, and records of state dirs that are
  // gone.
  Result<std::vector<CachedImage>> scan(const std::map<std::string, std::string>& in_use) const;
  // Removes one build unless the builder holds its lock; its directory disappears at once
  // (renamed, then deleted).
  Result<> remove(const std::filesystem::path& image_dir) const;
  const std::filesystem::path& imagesDir() const { return images_; }

 private:
  std::string userRecordName() const;

  std::filesystem::path images_;
  std::filesystem::path state_dir_;
};

}  // namespace hutch::storage

// What `hutch image prune` removes from the store of pulled images (<state>/oci, see
// box/template_image.cc): the layouts no template names any more (one directory per image, by
// the digest of its manifest: index.json and skopeo's leftovers) and then every blob no
// remaining layout reaches. A layer shared by a kept image stays; a layout being pulled (its
// `<hex>.lock` held) stays; so does anything written less than `keep` ago, so that a pull that
// has fetched blobs but not yet written its index.json loses nothing. Also the root disks kept
// by image (roots/): those no template links any more. With a size limit, only what brings the
// store within it goes.
// Blocking file I/O: call it from a worker, not the event loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "image/manifest.h"

namespace hutch::image {

struct StorePruneOptions {
  bool dry_run = false;
  std::chrono::seconds keep{std::chrono::hours(24)};
  std::filesystem::file_time_type now = std::filesystem::file_time_type::clock::now();
  // When set (hutchd's own prune past --image-cache-max-gib): the blobs no image uses go, then
  // only as many unused images and root disks, least recently written first, as bring the
  // store (layouts, blobs, root disks no template links) to at most this many bytes.
  std::optional<uint64_t> limit_bytes;
};

struct LayoutDecision {
  std::string digest;  // "sha256:<hex>", the layout's directory name
  uint64_t bytes = 0;  // of the directory itself (its blobs are counted apart)
  bool remove = false;
  std::string reason;  // what uses it, or why it is kept, or "unused"
};

struct StorePrune {
  std::vector<LayoutDecision> layouts;
  uint64_t blobs_removed = 0;  // (with dry_run: that would be removed)
  uint64_t blobs_kept = 0;
  uint64_t freed_bytes = 0;  // the removed layouts' and blobs' bytes
  // Set when no blob was removed because which blobs a kept layout needs is not known (its
  // index.json or a manifest cannot be read): the message says which.
  std::string blobs_kept_because;
  std::vector<std::string> problems;  // blobs that could not be removed, and why
  // The root disks kept for the next create of an image (roots/<key>/rootfs.img, a hard link of
  // each template's): one that no template links any more (one link left) goes.
  uint64_t roots_removed = 0;
  uint64_t roots_kept = 0;
};

// `oci`: the store (layouts/, blobs/sha256/); `in_use`: image manifest digest -> what uses it
// (a template). Removes nothing with dry_run. Errors only when the store cannot be listed.
Result<StorePrune> pruneStore(const std::filesystem::path& oci,
                              const std::map<std::string, std::string>& in_use,
                              const StorePruneOptions& options, const Limits& limits = {});

}  // namespace hutch::image

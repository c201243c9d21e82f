// The host's side of `hutch cp`: tar streams made from and unpacked into local trees with
// libarchive (see docs/cli.md, "cp", for why libarchive rather than the host's tar).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/result.h"
#include "cli/copy_plan.h"

namespace hutch::cli {

struct TarCallbacks {
  std::function<void(size_t)> on_bytes;                // archive bytes written or read
  std::function<void(const std::string&)> on_warning;  // something skipped or not restored
};

// Numeric owner written into every entry; nullopt keeps each file's own uid/gid.
struct TarOwner {
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
};

// Writes the plan's local source (plan.source_dir / plan.source_name) as a pax tar stream to
// `fd`, entries named as in the target directory (renameEntry). Modes, mtimes, symlinks (as
// links) and hard links inside the tree are kept; sockets are skipped with a warning; owners are
// numeric, with no user or group names.
Result<> writeTar(const CopyPlan& plan, int fd, const TarOwner& owner,
                  const TarCallbacks& callbacks);

// Reads a tar stream from `fd` (up to its EOF) and unpacks it into the plan's local target
// directory, renaming entries with renameEntry. Restores modes, mtimes and symlinks, and the
// numeric owners when `keep_owner` (otherwise files belong to whoever runs hutch). The archive is
// untrusted: names outside the source, absolute names, ".." and extraction through a symlink are
// refused.
Result<> extractTar(const CopyPlan& plan, int fd, bool keep_owner, const TarCallbacks& callbacks);

}  // namespace hutch::cli

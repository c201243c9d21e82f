// Small whole-file helpers: read, tail, write atomically, link and freeze.
//
// hutchd runs as root and uses these on files in box directories, which belong to the box's
// uid while its QEMU runs: a jailed QEMU that was taken over may have replaced any name there
// with a symlink, a FIFO or a hard link. So nothing here follows a symlink in the last path
// component, opens anything but a regular file, or blocks on opening a FIFO.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::sys {

// The whole file (up to `max_bytes`; longer files are an error). A symlink or anything but a
// regular file is an error (kInvalidArgument; ELOOP for a symlink).
Result<std::string> readFile(const std::filesystem::path& path, size_t max_bytes = 16 << 20);

// The last `max_bytes` of a file, starting at a line boundary when one is in range. Same rules
// as readFile.
Result<std::string> readTail(const std::filesystem::path& path, size_t max_bytes);

// Writes `content` to a new temporary file beside `path` (created exclusively, so a planted
// name is never followed), fsyncs it and renames it over `path`.
Result<> writeFileAtomic(const std::filesystem::path& path, std::string_view content,
                         mode_t mode = 0644);

// Opens `path` for appending (created with `mode` if missing), O_CLOEXEC. A symlink or
// anything but a regular file is an error.
Result<UniqueFd> openForAppend(const std::filesystem::path& path, mode_t mode = 0644);

// Gives the regular file `from` a second name `to` (a hard link). `from` is not followed: a
// symlink or anything but a regular file is refused, so `to` is always a file of its own kind.
Result<> linkFile(const std::filesystem::path& from, const std::filesystem::path& to);

// Makes the regular file `path` root's and read-only for everyone (0444): a frozen disk layer
// or snapshot file that boxes' uids may read but nobody may change. Not followed (a symlink or
// anything but a regular file is refused). Needs root.
Result<> freezeFile(const std::filesystem::path& path);

}  // namespace hutch::sys

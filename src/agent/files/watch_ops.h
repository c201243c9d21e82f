// The worker side of kWatch: inotify watches added as the user (inotify_add_watch checks read
// permission as the caller), recorded in a table the loop reads while it turns events into
// paths. The table's lock is held from inotify_add_watch until the watch is recorded, so the
// loop never sees an event of a watch it cannot name.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/files/file_ops.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "proto/files.h"

namespace hutch::agent {

// Watches one stream may hold (the kernel's own limit, fs.inotify.max_user_watches, is often
// lower: 8192 in a small box).
inline constexpr size_t kMaxWatchesPerStream = 65536;
// Create events reported for what a new directory already holds when its watch is added.
inline constexpr size_t kMaxFoundEvents = 10000;

struct WatchState {
  UniqueFd inotify;  // nonblocking; read on the loop
  bool recursive = false;
  std::mutex mutex;                           // guards dirs and root_wd
  std::unordered_map<int, std::string> dirs;  // watch descriptor -> the directory's path
  int root_wd = -1;
};

// The events a watch asks for.
uint32_t watchMask();

// Watches path (a directory; a symlink to one is followed) and, when recursive, every directory
// below it (never through a symlink). The directory's FileInfo. kNotFound for a missing
// directory, kInvalidArgument for a file.
Result<proto::FileInfo> beginWatch(const FileContext& ctx, WatchState& state,
                                   const std::string& path);

// A directory that appeared below a recursive watch: watches it and its subdirectories. With
// report_contents, what it holds already is returned as create events (it was made after the
// event that announced it was read); found: whether more than kMaxFoundEvents were left out.
struct FoundEntries {
  std::vector<proto::FileEvent> events;
  bool overflow = false;
};
Result<FoundEntries> watchNewDirectory(const FileContext& ctx, WatchState& state,
                                       const std::string& path, bool report_contents);

}  // namespace hutch::agent

#include "agent/files/watch_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "agent/files/file_info.h"
#include "agent/files/paths.h"

namespace hutch::agent {
namespace {

Error watchLimitError(const std::string& path) {
  return Error(Errc::kResourceExhausted,
               "Cannot watch " + path +
                   ": the box's limit of inotify watches is reached (raise "
                   "fs.inotify.max_user_watches, or watch fewer directories)");
}

// Adds one watch; false (no error) when the directory is gone or not readable meanwhile.
Result<bool> addWatch(const FileContext& ctx, WatchState& state, const std::string& path,
                      bool root) {
  std::lock_guard lock(state.mutex);
  if (state.dirs.size() >= kMaxWatchesPerStream) {
    return fail(Errc::kResourceExhausted, "Cannot watch " + path + ": one watch covers at most " +
                                              std::to_string(kMaxWatchesPerStream) +
                                              " directories");
  }
  const uint32_t mask = watchMask() | IN_ONLYDIR | (root ? 0u : IN_DONT_FOLLOW);
  const int wd = ::inotify_add_watch(state.inotify.get(), path.c_str(), mask);
  if (wd < 0) {
    const int err = errno;
    if (err == ENOSPC) return fail(watchLimitError(path));
    if (root) {
      if (err == ENOTDIR) {
        return fail(Errc::kInvalidArgument, "The path " + path + " is not a directory");
      }
      return fail(fileError(err, path, ctx.user));
    }
    return false;  // a subdirectory that vanished, became a symlink or is not readable
  }
  // The same directory reached by a new path (it was moved) keeps its descriptor.
  state.dirs[wd] = path;
  if (root) state.root_wd = wd;
  return true;
}

// Watches the directories below path, depth first; with found, records every entry.
Result<> watchBelow(const FileContext& ctx, WatchState& state, const std::string& path,
                    FoundEntries* found) {
  std::vector<std::string> todo = {path};
  while (!todo.empty()) {
    if (ctx.stop && ctx.stop->load(std::memory_order_relaxed)) {
      return fail(Errc::kCancelled, "The agent is shutting down");
    }
    const std::string dir_path = std::move(todo.back());
    todo.pop_back();
    const int fd = ::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
      ::close(fd);
      continue;
    }
    while (const dirent* entry = ::readdir(dir)) {
      const std::string_view name(entry->d_name);
      if (name == "." || name == "..") continue;
      const std::string child = childPath(dir_path, name);
      if (found) {
        if (found->events.size() < kMaxFoundEvents) {
          found->events.push_back(proto::FileEvent{proto::FileEventType::kCreate, child});
        } else {
          found->overflow = true;
        }
      }
      bool is_dir = entry->d_type == DT_DIR;
      if (entry->d_type == DT_UNKNOWN) {
        struct stat st {};
        is_dir = ::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                 S_ISDIR(st.st_mode);
      }
      if (!is_dir) continue;
      auto added = addWatch(ctx, state, child, /*root=*/false);
      if (!added) {
        ::closedir(dir);
        return fail(added.error());
      }
      if (*added) todo.push_back(child);
    }
    ::closedir(dir);
  }
  return ok();
}

}  // namespace

uint32_t watchMask() {
  return IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |
         IN_DELETE_SELF | IN_MOVE_SELF | IN_EXCL_UNLINK;
}

Result<proto::FileInfo> beginWatch(const FileContext& ctx, WatchState& state,
                                   const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(fileError(errno, path, ctx.user));
  if (!S_ISDIR(st.st_mode)) {
    return fail(Errc::kInvalidArgument,
                "The path " + path + " is not a directory; watch the directory it is in");
  }
  HUTCH_TRY_VOID(addWatch(ctx, state, path, /*root=*/true));
  if (state.recursive) HUTCH_TRY_VOID(watchBelow(ctx, state, path, nullptr));
  return describeFile(path, st, "", *ctx.users);
}

Result<FoundEntries> watchNewDirectory(const FileContext& ctx, WatchState& state,
                                       const std::string& path, bool report_contents) {
  FoundEntries found;
  HUTCH_TRY(bool added, addWatch(ctx, state, path, /*root=*/false));
  if (!added) return found;
  HUTCH_TRY_VOID(watchBelow(ctx, state, path, report_contents ? &found : nullptr));
  return found;
}

}  // namespace hutch::agent

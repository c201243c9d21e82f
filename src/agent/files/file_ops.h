// The blocking file operations of the files protocol. Each runs on a FileWorkers thread that
// has taken the requesting user's filesystem credentials, so the kernel checks permissions as
// that user and what is made belongs to that user. Paths are absolute and clean (paths.h).
//
// Symlinks are never followed where that would surprise: stat describes the link unless asked
// to follow, list and remove never descend through one (directory fds, O_NOFOLLOW, unlinkat),
// remove removes the link itself and does not cross into another filesystem.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "agent/exec/user_db.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "proto/files.h"

namespace hutch::agent {

struct FileContext {
  std::string user;                         // as requested ("root" for empty), for messages
  std::shared_ptr<const UserDb> users;      // names for uids and gids
  const std::atomic<bool>* stop = nullptr;  // set: long operations give up (kCancelled)
};

Result<proto::FileInfo> statPath(const FileContext& ctx, const std::string& path, bool follow);

// Depth first, each directory's entries in byte order, so the result is sorted by path
// component by component; stops after max_entries (truncated). Unreadable subdirectories and
// entries that vanish meanwhile are skipped.
Result<proto::FileList> listDirectory(const FileContext& ctx, const std::string& path,
                                      uint32_t depth, uint32_t max_entries);

Result<proto::FileMkdirResult> makeDirectory(const FileContext& ctx, const std::string& path,
                                             uint32_t mode, bool parents);

Result<proto::FileInfo> movePath(const FileContext& ctx, const std::string& from,
                                 const std::string& to, bool overwrite);

Result<> removePath(const FileContext& ctx, const std::string& path, bool recursive);

// A regular file opened for reading (a symlink is followed, as cat does).
struct OpenedFile {
  UniqueFd fd;
  proto::FileInfo info;
};
Result<OpenedFile> openForReading(const FileContext& ctx, const std::string& path);

// A write in progress: the new content goes to a temporary file beside the target, which
// replaces the target (rename) only when complete.
struct PendingWrite {
  std::string path;  // the target, after following a symlink at the requested path
  UniqueFd dir;      // the target's directory
  std::string name;  // the target's name in dir
  std::string temp_name;
  UniqueFd file;      // the temporary file
  bool done = false;  // renamed over the target, or removed
};

struct WriteAttributes {
  std::optional<uint32_t> mode;
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
};

// Follows a symlink at path, makes missing parents (when parents: 0755, and given to the
// attributes' owner and group when they name one, as the file will be: what envd and
// `install -D -o` do), checks that the user may replace an existing target and creates the
// temporary file (0600, the user's).
Result<> beginWrite(const FileContext& ctx, PendingWrite& write, const std::string& path,
                    bool parents, const WriteAttributes& attributes = {});
Result<> writeChunk(const FileContext& ctx, PendingWrite& write, std::string_view data);
// fsync, owner and mode (an existing target's unless given; a new file 0644 and the user's),
// rename over the target. The FileInfo of the new file.
Result<proto::FileInfo> commitWrite(const FileContext& ctx, PendingWrite& write,
                                    const WriteAttributes& attributes);
// Removes the temporary file unless the write was committed. Idempotent.
void discardWrite(PendingWrite& write);

}  // namespace hutch::agent

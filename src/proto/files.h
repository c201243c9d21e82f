// File operations (docs/protocol.md, "Files"): stat, list, mkdir, move and remove are requests
// (answered by kResult or kError on their stream); kFileRead, kFileWrite and kWatch open streams
// that carry file content (kData under the window) or change events (kFileEvents). All need the
// agent's "files" capability, kWatch its "watch" capability.
//
// Every operation runs in the box as `user` (empty: root): permissions are checked as that user
// and what it makes belongs to it. A relative path is relative to that user's home.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "proto/messages.h"

namespace hutch::proto {

// Limits of kFileList.
inline constexpr uint32_t kMaxListDepth = 32;
inline constexpr uint32_t kDefaultListEntries = 10000;
inline constexpr uint32_t kMaxListEntries = 100000;
// The longest path a request may name (PATH_MAX, terminator included).
inline constexpr size_t kMaxPathLength = 4095;
// A sender starts a new kFileEntries / kFileEvents frame once this much JSON is in the current
// one, so that no frame comes near kMaxPayload (one entry is at most ~75 KiB of JSON).
inline constexpr size_t kFileBatchBytes = size_t{256} * 1024;

enum class FileType { kFile, kDir, kSymlink, kOther };
std::string_view fileTypeName(FileType type);  // "file", "dir", "symlink", "other"

// What stat, list, mkdir, move, read and write answer about a file.
struct FileInfo {
  std::string name;  // the last component of path ("/" for the root)
  std::string path;  // absolute and clean (no "." or ".." components, no "//")
  FileType type = FileType::kFile;
  uint64_t size = 0;
  uint32_t mode = 0;        // permission bits with setuid, setgid and sticky: 0-07777
  std::string permissions;  // as ls shows them: "-rw-r--r--", "drwxr-xr-x", "lrwxrwxrwx"
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string owner;  // the user's name in the box, or the uid as text
  std::string group;  // the group's name in the box, or the gid as text
  int64_t mtime_ns = 0;
  std::string symlink_target;  // what a symlink points to; "" unless type is kSymlink

  bool operator==(const FileInfo&) const = default;
};

// kFileStat -> kResult FileInfo. The link itself unless follow.
struct FileStatRequest {
  std::string path;
  std::string user;
  bool follow = false;

  bool operator==(const FileStatRequest&) const = default;
};

// kFileList -> kFileEntries* then kResult FileList: what is in directory `path`, down to depth
// levels, never through a symlink, sorted by path component by component (a directory's
// contents follow it directly), at most max_entries (then truncated is true).
struct FileListRequest {
  std::string path;
  std::string user;
  uint32_t depth = 1;                          // 1-32
  uint32_t max_entries = kDefaultListEntries;  // 1-100000

  bool operator==(const FileListRequest&) const = default;
};

// kResult of kFileList (the last part of the entries), and each kFileEntries frame before it
// (where truncated is false).
struct FileList {
  std::vector<FileInfo> entries;
  bool truncated = false;

  bool operator==(const FileList&) const = default;
};

// kFileMkdir -> kResult FileMkdirResult.
struct FileMkdirRequest {
  std::string path;
  std::string user;
  uint32_t mode = 0755;  // 0-07777, exactly (no umask)
  bool parents = true;   // make missing parents (0755) too

  bool operator==(const FileMkdirRequest&) const = default;
};

struct FileMkdirResult {
  FileInfo entry;
  bool created = false;  // false: the directory was there already

  bool operator==(const FileMkdirResult&) const = default;
};

// kFileMove -> kResult FileInfo of `to`: rename(2) from to `to` (the new name, not a directory
// to move into).
struct FileMoveRequest {
  std::string from;
  std::string to;
  std::string user;
  bool overwrite = false;

  bool operator==(const FileMoveRequest&) const = default;
};

// kFileRemove -> kResult {}. A symlink is removed, never followed.
struct FileRemoveRequest {
  std::string path;
  std::string user;
  bool recursive = false;

  bool operator==(const FileRemoveRequest&) const = default;
};

// kFileRead opens a stream: kFileOpened FileInfo, kData (under the window), kEof.
struct FileReadRequest {
  std::string path;
  std::string user;

  bool operator==(const FileReadRequest&) const = default;
};

// kFileWrite opens a stream: kFileOpened FileWriteOpened; the host sends kData (under the
// window) and kEof; the agent answers kResult FileInfo once the new content is in place.
struct FileWriteRequest {
  std::string path;
  std::string user;
  std::optional<uint32_t> mode;  // 0-07777; unset: an existing file's mode, else 0644
  std::string owner;             // a user name or uid; empty: the existing file's, else `user`
  std::string group;             // a group name or gid; empty: the existing file's, else the
                                 // user's group
  bool parents = true;           // make missing parent directories (0755)

  bool operator==(const FileWriteRequest&) const = default;
};

// kFileOpened of a write stream: the file the content will replace or create (a symlink at the
// requested path is followed).
struct FileWriteOpened {
  std::string path;

  bool operator==(const FileWriteOpened&) const = default;
};

// kWatch opens a stream: kFileOpened FileInfo of the directory, then kFileEvents batches under
// the window until the host sends kClose. Needs the "watch" capability.
struct WatchRequest {
  std::string path;
  std::string user;
  bool recursive = false;

  bool operator==(const WatchRequest&) const = default;
};

// The event names of E2B's (and fsnotify's) watchers.
enum class FileEventType { kCreate, kWrite, kRemove, kRename, kChmod };
std::string_view fileEventTypeName(FileEventType type);  // "create", "write", ...

struct FileEvent {
  FileEventType type = FileEventType::kCreate;
  std::string path;  // absolute

  bool operator==(const FileEvent&) const = default;
};

// kFileEvents, guest->host.
struct FileEvents {
  std::vector<FileEvent> events;
  // Events were lost before these (the kernel's queue overflowed while the host did not read).
  bool overflow = false;

  bool operator==(const FileEvents&) const = default;
};

// Value checks (both sides: the host before sending, the agent after decoding): a path that is
// empty, too long or has a NUL, bad depth, max_entries or mode are kInvalidArgument.
Result<> validate(const FileStatRequest& request);
Result<> validate(const FileListRequest& request);
Result<> validate(const FileMkdirRequest& request);
Result<> validate(const FileMoveRequest& request);
Result<> validate(const FileRemoveRequest& request);
Result<> validate(const FileReadRequest& request);
Result<> validate(const FileWriteRequest& request);
Result<> validate(const WatchRequest& request);

std::string encodeMessage(const FileInfo& message);
std::string encodeMessage(const FileStatRequest& message);
std::string encodeMessage(const FileListRequest& message);
std::string encodeMessage(const FileList& message);
std::string encodeMessage(const FileMkdirRequest& message);
std::string encodeMessage(const FileMkdirResult& message);
std::string encodeMessage(const FileMoveRequest& message);
std::string encodeMessage(const FileRemoveRequest& message);
std::string encodeMessage(const FileReadRequest& message);
std::string encodeMessage(const FileWriteRequest& message);
std::string encodeMessage(const FileWriteOpened& message);
std::string encodeMessage(const WatchRequest& message);
std::string encodeMessage(const FileEvents& message);

// The decoders of what the agent sends check every field's type and range (a box is hostile
// input): an unknown file or event type, a relative path, a mode above 07777 are kProtocol.
template <>
Result<FileInfo> decodeMessage<FileInfo>(std::string_view payload);
template <>
Result<FileStatRequest> decodeMessage<FileStatRequest>(std::string_view payload);
template <>
Result<FileListRequest> decodeMessage<FileListRequest>(std::string_view payload);
template <>
Result<FileList> decodeMessage<FileList>(std::string_view payload);
template <>
Result<FileMkdirRequest> decodeMessage<FileMkdirRequest>(std::string_view payload);
template <>
Result<FileMkdirResult> decodeMessage<FileMkdirResult>(std::string_view payload);
template <>
Result<FileMoveRequest> decodeMessage<FileMoveRequest>(std::string_view payload);
template <>
Result<FileRemoveRequest> decodeMessage<FileRemoveRequest>(std::string_view payload);
template <>
Result<FileReadRequest> decodeMessage<FileReadRequest>(std::string_view payload);
template <>
Result<FileWriteRequest> decodeMessage<FileWriteRequest>(std::string_view payload);
template <>
Result<FileWriteOpened> decodeMessage<FileWriteOpened>(std::string_view payload);
template <>
Result<WatchRequest> decodeMessage<WatchRequest>(std::string_view payload);
template <>
Result<FileEvents> decodeMessage<FileEvents>(std::string_view payload);

}  // namespace hutch::proto

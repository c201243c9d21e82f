#include "proto/files.h"

#include <array>
#include <string>
#include <utility>

#include "proto/json_fields.h"
#include "proto/schema.h"

namespace hutch::proto {
namespace {

using detail::hasNul;

constexpr uint32_t kMaxMode = 07777;

// A path a request names: the agent resolves a relative one against the user's home.
Result<> checkPath(std::string_view path, std::string_view what) {
  if (path.empty()) return fail(Errc::kInvalidArgument, "The " + std::string(what) + " is empty");
  if (hasNul(path)) {
    return fail(Errc::kInvalidArgument, "The " + std::string(what) + " contains a NUL byte");
  }
  if (path.size() > kMaxPathLength) {
    return fail(Errc::kInvalidArgument, "The " + std::string(what) + " is longer than " +
                                            std::to_string(kMaxPathLength) + " bytes");
  }
  return ok();
}

Result<> checkUser(std::string_view user) {
  if (hasNul(user)) return fail(Errc::kInvalidArgument, "The user contains a NUL byte");
  return ok();
}

// A path the agent reports: absolute, without NUL bytes.
Result<> checkReportedPath(const std::string& path, const char* field) {
  if (path.empty() || path[0] != '/' || hasNul(path)) {
    return fail(detail::badField(field, "must be an absolute path without NUL bytes"));
  }
  return ok();
}

Result<> checkPermissions(const std::string& permissions, const char* field) {
  if (permissions.size() != 10) return fail(detail::badField(field, "must have 10 characters"));
  return ok();
}

}  // namespace

namespace detail {

template <>
struct EnumNames<FileType> {
  static constexpr std::array<std::pair<FileType, std::string_view>, 4> kNames = {{
      {FileType::kFile, "file"},
      {FileType::kDir, "dir"},
      {FileType::kSymlink, "symlink"},
      {FileType::kOther, "other"},
  }};
  static Error unknown(std::string_view name) {
    return Error(Errc::kProtocol, "Unknown file type \"" + std::string(name) + "\"");
  }
};

template <>
struct EnumNames<FileEventType> {
  static constexpr std::array<std::pair<FileEventType, std::string_view>, 5> kNames = {{
      {FileEventType::kCreate, "create"},
      {FileEventType::kWrite, "write"},
      {FileEventType::kRemove, "remove"},
      {FileEventType::kRename, "rename"},
      {FileEventType::kChmod, "chmod"},
  }};
  static Error unknown(std::string_view name) {
    return Error(Errc::kProtocol, "Unknown file event type \"" + std::string(name) + "\"");
  }
};

template <>
struct Schema<FileInfo> {
  static constexpr const char* kName = "file information";
  static constexpr const char* kElementName = "A file's description";
  static constexpr auto kFields = std::tuple(
      field("name", &FileInfo::name),
      field("path", &FileInfo::path, kRequired, {.check = checkReportedPath}),
      field("type", &FileInfo::type), field("size", &FileInfo::size),
      field("mode", &FileInfo::mode, kRequired, {.range = Range{0, kMaxMode}}),
      field("permissions", &FileInfo::permissions, kRequired, {.check = checkPermissions}),
      field("uid", &FileInfo::uid), field("gid", &FileInfo::gid), field("owner", &FileInfo::owner),
      field("group", &FileInfo::group), field("mtime_ns", &FileInfo::mtime_ns),
      field("symlink_target", &FileInfo::symlink_target, kOptional));

  // name is the last component of path: one component, but "/" for the root.
  static Result<> check(const FileInfo& info) {
    const bool is_root = info.path == "/" && info.name == "/";
    if (!is_root && (info.name.empty() || info.name.find('/') != std::string::npos ||
                     hasNul(info.name) || info.name == "." || info.name == "..")) {
      return fail(badField("name", "must be one path component"));
    }
    return ok();
  }
};

template <>
struct Schema<FileStatRequest> {
  static constexpr const char* kName = "stat request";
  static constexpr auto kFields = std::tuple(field("path", &FileStatRequest::path),
                                             field("user", &FileStatRequest::user, kOmitEmpty),
                                             field("follow", &FileStatRequest::follow, kOptional));
  static Result<> check(const FileStatRequest& request) { return validate(request); }
};

// depth and max_entries out of their range are bad values (invalid_argument from validate), not
// a broken message: the decoder takes any uint32_t.
template <>
struct Schema<FileListRequest> {
  static constexpr const char* kName = "list request";
  static constexpr auto kFields = std::tuple(
      field("path", &FileListRequest::path), field("user", &FileListRequest::user, kOmitEmpty),
      field("depth", &FileListRequest::depth, kOptional),
      field("max_entries", &FileListRequest::max_entries, kOptional));
  static Result<> check(const FileListRequest& request) { return validate(request); }
};

template <>
struct Schema<FileList> {
  static constexpr const char* kName = "file list";
  static constexpr auto kFields = std::tuple(field("entries", &FileList::entries),
                                             field("truncated", &FileList::truncated, kOptional));
};

template <>
struct Schema<FileMkdirRequest> {
  static constexpr const char* kName = "mkdir request";
  static constexpr auto kFields = std::tuple(
      field("path", &FileMkdirRequest::path), field("user", &FileMkdirRequest::user, kOmitEmpty),
      field("mode", &FileMkdirRequest::mode, kOptional),
      field("parents", &FileMkdirRequest::parents, kOptional));
  static Result<> check(const FileMkdirRequest& request) { return validate(request); }
};

template <>
struct Schema<FileMkdirResult> {
  static constexpr const char* kName = "mkdir result";
  static constexpr auto kFields = std::tuple(field("entry", &FileMkdirResult::entry),
                                             field("created", &FileMkdirResult::created));
};

template <>
struct Schema<FileMoveRequest> {
  static constexpr const char* kName = "move request";
  static constexpr auto kFields =
      std::tuple(field("from", &FileMoveRequest::from), field("to", &FileMoveRequest::to),
                 field("user", &FileMoveRequest::user, kOmitEmpty),
                 field("overwrite", &FileMoveRequest::overwrite, kOptional));
  static Result<> check(const FileMoveRequest& request) { return validate(request); }
};

template <>
struct Schema<FileRemoveRequest> {
  static constexpr const char* kName = "remove request";
  static constexpr auto kFields = std::tuple(
      field("path", &FileRemoveRequest::path), field("user", &FileRemoveRequest::user, kOmitEmpty),
      field("recursive", &FileRemoveRequest::recursive, kOptional));
  static Result<> check(const FileRemoveRequest& request) { return validate(request); }
};

template <>
struct Schema<FileReadRequest> {
  static constexpr const char* kName = "read request";
  static constexpr auto kFields = std::tuple(field("path", &FileReadRequest::path),
                                             field("user", &FileReadRequest::user, kOmitEmpty));
  static Result<> check(const FileReadRequest& request) { return validate(request); }
};

template <>
struct Schema<FileWriteRequest> {
  static constexpr const char* kName = "write request";
  static constexpr auto kFields = std::tuple(
      field("path", &FileWriteRequest::path), field("user", &FileWriteRequest::user, kOmitEmpty),
      field("mode", &FileWriteRequest::mode, kOmitEmpty),
      field("owner", &FileWriteRequest::owner, kOmitEmpty),
      field("group", &FileWriteRequest::group, kOmitEmpty),
      field("parents", &FileWriteRequest::parents, kOptional));
  static Result<> check(const FileWriteRequest& request) { return validate(request); }
};

template <>
struct Schema<FileWriteOpened> {
  static constexpr const char* kName = "write stream opening";
  static constexpr auto kFields =
      std::tuple(field("path", &FileWriteOpened::path, kRequired, {.check = checkReportedPath}));
};

template <>
struct Schema<WatchRequest> {
  static constexpr const char* kName = "watch request";
  static constexpr auto kFields =
      std::tuple(field("path", &WatchRequest::path), field("user", &WatchRequest::user, kOmitEmpty),
                 field("recursive", &WatchRequest::recursive, kOptional));
  static Result<> check(const WatchRequest& request) { return validate(request); }
};

template <>
struct Schema<FileEvent> {
  static constexpr const char* kName = "file event";
  static constexpr const char* kElementName = "A file event";
  static constexpr auto kFields =
      std::tuple(field("type", &FileEvent::type),
                 field("path", &FileEvent::path, kRequired, {.check = checkReportedPath}));
};

template <>
struct Schema<FileEvents> {
  static constexpr const char* kName = "file events";
  static constexpr auto kFields = std::tuple(field("events", &FileEvents::events),
                                             field("overflow", &FileEvents::overflow, kOmitEmpty));
};

}  // namespace detail

std::string_view fileTypeName(FileType type) {
  return detail::enumName(type);
}

std::string_view fileEventTypeName(FileEventType type) {
  return detail::enumName(type);
}

Result<> validate(const FileStatRequest& request) {
  HUTCH_TRY_VOID(checkPath(request.path, "path"));
  return checkUser(request.user);
}

Result<> validate(const FileListRequest& request) {
  HUTCH_TRY_VOID(checkPath(request.path, "path"));
  if (request.depth < 1 || request.depth > kMaxListDepth) {
    return fail(Errc::kInvalidArgument, "The depth must be 1-" + std::to_string(kMaxListDepth) +
                                            ", not " + std::to_string(request.depth));
  }
  if (request.max_entries < 1 || request.max_entries > kMaxListEntries) {
    return fail(Errc::kInvalidArgument, "max_entries must be 1-" + std::to_string(kMaxListEntries) +
                                            ", not " + std::to_string(request.max_entries));
  }
  return checkUser(request.user);
}

Result<> validate(const FileMkdirRequest& request) {
  HUTCH_TRY_VOID(checkPath(request.path, "path"));
  if (request.mode > kMaxMode) {
    return fail(Errc::kInvalidArgument, "The mode must be 0-07777 (permission bits)");
  }
  return checkUser(request.user);
}

Result<> validate(const FileMoveRequest& request) {
  HUTCH_TRY_VOID(checkPath(request.from, "source path"));
  HUTCH_TRY_VOID(checkPath(request.to, "destination path"));
  return checkUser(request.user);
}

Result<> validate(const FileRemoveRequest& request) {
  HUTCH_TRY_VOID(checkPath(request.path, "path"));
  return checkUser(request.user);
}

Result<> validate(const FileReadRequest& request) {
  HUTCH_TRY_VOID(checkPath(request.path, "path"));
  return checkUser(request.user);
}

Result<> validate(const FileWriteRequest& request) {
  HUTCH_TRY_VOID(checkPath(request.path, "path"));
  if (request.mode && *request.mode > kMaxMode) {
    return fail(Errc::kInvalidArgument, "The mode must be 0-07777 (permission bits)");
  }
  if (hasNul(request.owner) || hasNul(request.group)) {
    return fail(Errc::kInvalidArgument, "The owner or group contains a NUL byte");
  }
  return checkUser(request.user);
}

Result<> validate(const WatchRequest& request) {
  HUTCH_TRY_VOID(checkPath(request.path, "path"));
  return checkUser(request.user);
}

HUTCH_PROTO_CODEC(FileInfo)
HUTCH_PROTO_CODEC(FileStatRequest)
HUTCH_PROTO_CODEC(FileListRequest)
HUTCH_PROTO_CODEC(FileList)
HUTCH_PROTO_CODEC(FileMkdirRequest)
HUTCH_PROTO_CODEC(FileMkdirResult)
HUTCH_PROTO_CODEC(FileMoveRequest)
HUTCH_PROTO_CODEC(FileRemoveRequest)
HUTCH_PROTO_CODEC(FileReadRequest)
HUTCH_PROTO_CODEC(FileWriteRequest)
HUTCH_PROTO_CODEC(FileWriteOpened)
HUTCH_PROTO_CODEC(WatchRequest)
HUTCH_PROTO_CODEC(FileEvents)

}  // namespace hutch::proto

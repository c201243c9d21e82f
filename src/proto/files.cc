#include "proto/files.h"

#include <array>
#include <limits>
#include <utility>

#include "proto/json_fields.h"

namespace hutch::proto {
namespace {

using detail::hasNul;
using detail::Json;
using detail::readBool;
using detail::readInt;
using detail::readString;

constexpr int64_t kMaxMode = 07777;
constexpr int64_t kMaxId = std::numeric_limits<uint32_t>::max();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinInt64 = std::numeric_limits<int64_t>::min();

constexpr std::array<std::pair<FileType, std::string_view>, 4> kFileTypes = {{
    {FileType::kFile, "file"},
    {FileType::kDir, "dir"},
    {FileType::kSymlink, "symlink"},
    {FileType::kOther, "other"},
}};

constexpr std::array<std::pair<FileEventType, std::string_view>, 5> kEventTypes = {{
    {FileEventType::kCreate, "create"},
    {FileEventType::kWrite, "write"},
    {FileEventType::kRemove, "remove"},
    {FileEventType::kRename, "rename"},
    {FileEventType::kChmod, "chmod"},
}};

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
    return fail(Errc::kProtocol,
                std::string("Field \"") + field + "\" must be an absolute path without NUL bytes");
  }
  return ok();
}

Result<const Json*> arrayField(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) {
    return fail(Errc::kProtocol, std::string("Field \"") + key + "\" must be an array");
  }
  return &*it;
}

Result<uint32_t> readU32(const Json& j, const char* key, bool required, int64_t min, int64_t max,
                         uint32_t fallback) {
  std::optional<int64_t> value;
  HUTCH_TRY_VOID(readInt(j, key, required, min, max, value));
  return value ? static_cast<uint32_t>(*value) : fallback;
}

Json toJson(const FileInfo& info) {
  return {
      {"name", info.name},   {"path", info.path},         {"type", fileTypeName(info.type)},
      {"size", info.size},   {"mode", info.mode},         {"permissions", info.permissions},
      {"uid", info.uid},     {"gid", info.gid},           {"owner", info.owner},
      {"group", info.group}, {"mtime_ns", info.mtime_ns}, {"symlink_target", info.symlink_target}};
}

Result<FileInfo> fileInfoFromJson(const Json& j) {
  if (!j.is_object()) return fail(Errc::kProtocol, "A file's description must be a JSON object");
  FileInfo info;
  HUTCH_TRY_VOID(readString(j, "name", true, info.name));
  HUTCH_TRY_VOID(readString(j, "path", true, info.path));
  HUTCH_TRY_VOID(checkReportedPath(info.path, "path"));
  const bool is_root = info.path == "/" && info.name == "/";
  if (!is_root && (info.name.empty() || info.name.find('/') != std::string::npos ||
                   hasNul(info.name) || info.name == "." || info.name == "..")) {
    return fail(Errc::kProtocol, "Field \"name\" must be one path component");
  }
  std::string type;
  HUTCH_TRY_VOID(readString(j, "type", true, type));
  bool known = false;
  for (const auto& [value, name] : kFileTypes) {
    if (name == type) {
      info.type = value;
      known = true;
    }
  }
  if (!known) return fail(Errc::kProtocol, "Unknown file type \"" + type + "\"");
  std::optional<int64_t> size;
  HUTCH_TRY_VOID(readInt(j, "size", true, 0, kMaxInt64, size));
  info.size = static_cast<uint64_t>(*size);
  HUTCH_TRY(info.mode, readU32(j, "mode", true, 0, kMaxMode, 0));
  HUTCH_TRY_VOID(readString(j, "permissions", true, info.permissions));
  if (info.permissions.size() != 10) {
    return fail(Errc::kProtocol, "Field \"permissions\" must have 10 characters");
  }
  HUTCH_TRY(info.uid, readU32(j, "uid", true, 0, kMaxId, 0));
  HUTCH_TRY(info.gid, readU32(j, "gid", true, 0, kMaxId, 0));
  HUTCH_TRY_VOID(readString(j, "owner", true, info.owner));
  HUTCH_TRY_VOID(readString(j, "group", true, info.group));
  std::optional<int64_t> mtime;
  HUTCH_TRY_VOID(readInt(j, "mtime_ns", true, kMinInt64, kMaxInt64, mtime));
  info.mtime_ns = *mtime;
  HUTCH_TRY_VOID(readString(j, "symlink_target", false, info.symlink_target));
  return info;
}

Result<FileInfo> fileInfoField(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return fail(Errc::kProtocol, std::string("Missing field \"") + key + "\"");
  return fileInfoFromJson(*it);
}

}  // namespace

std::string_view fileTypeName(FileType type) {
  for (const auto& [value, name] : kFileTypes) {
    if (value == type) return name;
  }
  return "other";
}

std::string_view fileEventTypeName(FileEventType type) {
  for (const auto& [value, name] : kEventTypes) {
    if (value == type) return name;
  }
  return "write";
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

std::string encodeMessage(const FileInfo& message) {
  return detail::dump(toJson(message));
}

std::string encodeMessage(const FileStatRequest& message) {
  Json j = {{"path", message.path}, {"follow", message.follow}};
  if (!message.user.empty()) j["user"] = message.user;
  return detail::dump(j);
}

std::string encodeMessage(const FileListRequest& message) {
  Json j = {{"path", message.path}, {"depth", message.depth}, {"max_entries", message.max_entries}};
  if (!message.user.empty()) j["user"] = message.user;
  return detail::dump(j);
}

std::string encodeMessage(const FileList& message) {
  Json entries = Json::array();
  for (const auto& entry : message.entries) entries.push_back(toJson(entry));
  return detail::dump({{"entries", std::move(entries)}, {"truncated", message.truncated}});
}

std::string encodeMessage(const FileMkdirRequest& message) {
  Json j = {{"path", message.path}, {"mode", message.mode}, {"parents", message.parents}};
  if (!message.user.empty()) j["user"] = message.user;
  return detail::dump(j);
}

std::string encodeMessage(const FileMkdirResult& message) {
  return detail::dump({{"entry", toJson(message.entry)}, {"created", message.created}});
}

std::string encodeMessage(const FileMoveRequest& message) {
  Json j = {{"from", message.from}, {"to", message.to}, {"overwrite", message.overwrite}};
  if (!message.user.empty()) j["user"] = message.user;
  return detail::dump(j);
}

std::string encodeMessage(const FileRemoveRequest& message) {
  Json j = {{"path", message.path}, {"recursive", message.recursive}};
  if (!message.user.empty()) j["user"] = message.user;
  return detail::dump(j);
}

std::string encodeMessage(const FileReadRequest& message) {
  Json j = {{"path", message.path}};
  if (!message.user.empty()) j["user"] = message.user;
  return detail::dump(j);
}

std::string encodeMessage(const FileWriteRequest& message) {
  Json j = {{"path", message.path}, {"parents", message.parents}};
  if (!message.user.empty()) j["user"] = message.user;
  if (message.mode) j["mode"] = *message.mode;
  if (!message.owner.empty()) j["owner"] = message.owner;
  if (!message.group.empty()) j["group"] = message.group;
  return detail::dump(j);
}

std::string encodeMessage(const FileWriteOpened& message) {
  return detail::dump({{"path", message.path}});
}

std::string encodeMessage(const WatchRequest& message) {
  Json j = {{"path", message.path}, {"recursive", message.recursive}};
  if (!message.user.empty()) j["user"] = message.user;
  return detail::dump(j);
}

std::string encodeMessage(const FileEvents& message) {
  Json events = Json::array();
  for (const auto& event : message.events) {
    events.push_back({{"type", fileEventTypeName(event.type)}, {"path", event.path}});
  }
  Json j = {{"events", std::move(events)}};
  if (message.overflow) j["overflow"] = true;
  return detail::dump(j);
}

template <>
Result<FileInfo> decodeMessage<FileInfo>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "file information"));
  return fileInfoFromJson(j);
}

template <>
Result<FileStatRequest> decodeMessage<FileStatRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "stat request"));
  FileStatRequest request;
  HUTCH_TRY_VOID(readString(j, "path", true, request.path));
  HUTCH_TRY_VOID(readString(j, "user", false, request.user));
  HUTCH_TRY_VOID(readBool(j, "follow", false, request.follow));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

template <>
Result<FileListRequest> decodeMessage<FileListRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "list request"));
  FileListRequest request;
  HUTCH_TRY_VOID(readString(j, "path", true, request.path));
  HUTCH_TRY_VOID(readString(j, "user", false, request.user));
  // Out of range is a bad value (invalid_argument from validate), not a broken message.
  HUTCH_TRY(request.depth, readU32(j, "depth", false, 0, kMaxId, 1));
  HUTCH_TRY(request.max_entries, readU32(j, "max_entries", false, 0, kMaxId, kDefaultListEntries));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

template <>
Result<FileList> decodeMessage<FileList>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "file list"));
  HUTCH_TRY(const Json* entries, arrayField(j, "entries"));
  FileList list;
  list.entries.reserve(entries->size());  // what arrived, not what a field claims
  for (const Json& item : *entries) {
    HUTCH_TRY(FileInfo info, fileInfoFromJson(item));
    list.entries.push_back(std::move(info));
  }
  HUTCH_TRY_VOID(readBool(j, "truncated", false, list.truncated));
  return list;
}

template <>
Result<FileMkdirRequest> decodeMessage<FileMkdirRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "mkdir request"));
  FileMkdirRequest request;
  HUTCH_TRY_VOID(readString(j, "path", true, request.path));
  HUTCH_TRY_VOID(readString(j, "user", false, request.user));
  HUTCH_TRY(request.mode, readU32(j, "mode", false, 0, kMaxId, 0755));
  HUTCH_TRY_VOID(readBool(j, "parents", false, request.parents));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

template <>
Result<FileMkdirResult> decodeMessage<FileMkdirResult>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "mkdir result"));
  FileMkdirResult result;
  HUTCH_TRY(result.entry, fileInfoField(j, "entry"));
  HUTCH_TRY_VOID(readBool(j, "created", true, result.created));
  return result;
}

template <>
Result<FileMoveRequest> decodeMessage<FileMoveRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "move request"));
  FileMoveRequest request;
  HUTCH_TRY_VOID(readString(j, "from", true, request.from));
  HUTCH_TRY_VOID(readString(j, "to", true, request.to));
  HUTCH_TRY_VOID(readString(j, "user", false, request.user));
  HUTCH_TRY_VOID(readBool(j, "overwrite", false, request.overwrite));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

template <>
Result<FileRemoveRequest> decodeMessage<FileRemoveRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "remove request"));
  FileRemoveRequest request;
  HUTCH_TRY_VOID(readString(j, "path", true, request.path));
  HUTCH_TRY_VOID(readString(j, "user", false, request.user));
  HUTCH_TRY_VOID(readBool(j, "recursive", false, request.recursive));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

template <>
Result<FileReadRequest> decodeMessage<FileReadRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "read request"));
  FileReadRequest request;
  HUTCH_TRY_VOID(readString(j, "path", true, request.path));
  HUTCH_TRY_VOID(readString(j, "user", false, request.user));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

template <>
Result<FileWriteRequest> decodeMessage<FileWriteRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "write request"));
  FileWriteRequest request;
  HUTCH_TRY_VOID(readString(j, "path", true, request.path));
  HUTCH_TRY_VOID(readString(j, "user", false, request.user));
  std::optional<int64_t> mode;
  HUTCH_TRY_VOID(readInt(j, "mode", false, 0, kMaxId, mode));
  if (mode) request.mode = static_cast<uint32_t>(*mode);
  HUTCH_TRY_VOID(readString(j, "owner", false, request.owner));
  HUTCH_TRY_VOID(readString(j, "group", false, request.group));
  HUTCH_TRY_VOID(readBool(j, "parents", false, request.parents));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

template <>
Result<FileWriteOpened> decodeMessage<FileWriteOpened>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "write stream opening"));
  FileWriteOpened opened;
  HUTCH_TRY_VOID(readString(j, "path", true, opened.path));
  HUTCH_TRY_VOID(checkReportedPath(opened.path, "path"));
  return opened;
}

template <>
Result<WatchRequest> decodeMessage<WatchRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "watch request"));
  WatchRequest request;
  HUTCH_TRY_VOID(readString(j, "path", true, request.path));
  HUTCH_TRY_VOID(readString(j, "user", false, request.user));
  HUTCH_TRY_VOID(readBool(j, "recursive", false, request.recursive));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

template <>
Result<FileEvents> decodeMessage<FileEvents>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "file events"));
  HUTCH_TRY(const Json* events, arrayField(j, "events"));
  FileEvents batch;
  batch.events.reserve(events->size());
  for (const Json& item : *events) {
    if (!item.is_object()) return fail(Errc::kProtocol, "A file event must be a JSON object");
    FileEvent event;
    std::string type;
    HUTCH_TRY_VOID(readString(item, "type", true, type));
    bool known = false;
    for (const auto& [value, name] : kEventTypes) {
      if (name == type) {
        event.type = value;
        known = true;
      }
    }
    if (!known) return fail(Errc::kProtocol, "Unknown file event type \"" + type + "\"");
    HUTCH_TRY_VOID(readString(item, "path", true, event.path));
    HUTCH_TRY_VOID(checkReportedPath(event.path, "path"));
    batch.events.push_back(std::move(event));
  }
  HUTCH_TRY_VOID(readBool(j, "overflow", false, batch.overflow));
  return batch;
}

}  // namespace hutch::proto

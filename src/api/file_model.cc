#include "api/file_model.h"

#include <fmt/format.h>

#include <charconv>

#include "api/json_model.h"

namespace hutch::api {

namespace {

using nlohmann::json;

constexpr uint32_t kMaxMode = 07777;

Result<std::string> readPath(const json& j, const char* key, std::string_view what) {
  std::string path;
  HUTCH_TRY_VOID(readField(j, key, path, what));
  if (path.empty()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Field '{}' is required in {} (a path in the box; a relative one is "
                            "relative to the user's home)",
                            key, what));
  }
  return path;
}

Result<bool> parseFlag(std::string_view text, std::string_view name) {
  if (text.empty() || text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  return fail(Errc::kInvalidArgument,
              fmt::format("Query parameter '{}' must be true or false, not '{}'", name, text));
}

}  // namespace

json toJson(const proto::FileInfo& info) {
  return json::parse(proto::encodeMessage(info));
}

json toJson(const proto::FileMkdirResult& made) {
  json j = toJson(made.entry);
  j["created"] = made.created;
  return j;
}

Result<uint32_t> parseOctalMode(std::string_view text, std::string_view what) {
  std::string_view digits = text;
  if (digits.starts_with("0o") || digits.starts_with("0O")) digits.remove_prefix(2);
  uint32_t mode = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mode, 8);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      mode > kMaxMode) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The mode in {} must be octal permission bits such as 0644 or 0755 "
                            "(at most 07777), not '{}'",
                            what, text));
  }
  return mode;
}

Result<uint32_t> parseMode(const json& value, std::string_view what) {
  if (value.is_string()) return parseOctalMode(value.get<std::string>(), what);
  if (value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() <= kMaxMode) {
    return static_cast<uint32_t>(value.get<int64_t>());
  }
  return fail(Errc::kInvalidArgument,
              fmt::format("Field 'mode' in {} must be a number (0-4095; 493 is 0755) or an octal "
                          "string (\"0755\"), not {}",
                          what, value.dump()));
}

Result<proto::FileMkdirRequest> parseMkdir(std::string_view body) {
  constexpr std::string_view kWhat = "a mkdir request";
  HUTCH_TRY(json j, parseObject(body));
  HUTCH_TRY_VOID(rejectUnknownFields(j, {"path", "mode", "parents", "user"}, kWhat));
  proto::FileMkdirRequest r;
  HUTCH_TRY(r.path, readPath(j, "path", kWhat));
  if (auto mode = j.find("mode"); mode != j.end() && !mode->is_null()) {
    HUTCH_TRY(r.mode, parseMode(*mode, kWhat));
  }
  HUTCH_TRY_VOID(readField(j, "parents", r.parents, kWhat));
  HUTCH_TRY_VOID(readField(j, "user", r.user, kWhat));
  return r;
}

Result<proto::FileMoveRequest> parseMove(std::string_view body) {
  constexpr std::string_view kWhat = "a move request";
  HUTCH_TRY(json j, parseObject(body));
  HUTCH_TRY_VOID(rejectUnknownFields(j, {"from", "to", "overwrite", "user"}, kWhat));
  proto::FileMoveRequest r;
  HUTCH_TRY(r.from, readPath(j, "from", kWhat));
  HUTCH_TRY(r.to, readPath(j, "to", kWhat));
  HUTCH_TRY_VOID(readField(j, "overwrite", r.overwrite, kWhat));
  HUTCH_TRY_VOID(readField(j, "user", r.user, kWhat));
  return r;
}

Result<FileQuery> parseFileQuery(const PathParams& query, const std::set<std::string>& allowed) {
  FileQuery q;
  for (const auto& [key, value] : query) {
    if (key == "path") {
      q.path = value;
    } else if (key == "user") {
      q.user = value;
    } else if (!allowed.contains(key)) {
      std::set<std::string> known = allowed;
      known.insert("path");
      known.insert("user");
      return fail(Errc::kInvalidArgument,
                  fmt::format("Unknown query parameter '{}'; this endpoint takes {}", key,
                              fmt::join(known, ", ")));
    } else if (key == "depth") {
      uint32_t depth = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), depth);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size() || depth < 1 ||
          depth > proto::kMaxListDepth) {
        return fail(Errc::kInvalidArgument,
                    fmt::format("Query parameter 'depth' must be 1-{}, not '{}'",
                                proto::kMaxListDepth, value));
      }
      q.depth = depth;
    } else if (key == "mode") {
      HUTCH_TRY(q.mode, parseOctalMode(value, "query parameter 'mode'"));
    } else if (key == "owner") {
      q.owner = value;
    } else if (key == "group") {
      q.group = value;
    } else if (key == "recursive") {
      HUTCH_TRY(q.recursive, parseFlag(value, key));
    }
  }
  if (q.path.empty()) {
    return fail(Errc::kInvalidArgument,
                "Query parameter 'path' is required (?path=/home/hutch/file; a relative path is "
                "relative to the user's home)");
  }
  return q;
}

}  // namespace hutch::api

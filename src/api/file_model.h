// The JSON and query forms of the files API (docs/api.md "Files without exec"): FileInfo, the
// bodies of mkdir and move, and the query parameters of the other endpoints. Strict: unknown
// fields or parameters and wrong types are kInvalidArgument naming them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "api/router.h"
#include "base/result.h"
#include "proto/files.h"

namespace hutch::api {

nlohmann::json toJson(const proto::FileInfo& info);
// FileInfo with "created".
nlohmann::json toJson(const proto::FileMkdirResult& made);

// A mode: a number (0-4095: 493 is 0755) or a string of octal digits ("0755", "755", "0o755").
Result<uint32_t> parseMode(const nlohmann::json& value, std::string_view what);
// A mode given as text (a query parameter): always octal ("0644", "644").
Result<uint32_t> parseOctalMode(std::string_view text, std::string_view what);

// POST /v1/boxes/{box}/files/mkdir: {"path", "mode"?, "parents"?, "user"?}. An empty user stays
// empty (the handler puts in the box's default user).
Result<proto::FileMkdirRequest> parseMkdir(std::string_view body);
// POST /v1/boxes/{box}/files/move: {"from", "to", "overwrite"?, "user"?}.
Result<proto::FileMoveRequest> parseMove(std::string_view body);

// The query parameters of the files endpoints. `allowed` names the ones the endpoint takes
// besides path and user; any other is refused.
struct FileQuery {
  std::string path;
  std::string user;
  uint32_t depth = 1;
  std::optional<uint32_t> mode;
  std::string owner;
  std::string group;
  bool recursive = false;
};
Result<FileQuery> parseFileQuery(const PathParams& query, const std::set<std::string>& allowed);

}  // namespace hutch::api

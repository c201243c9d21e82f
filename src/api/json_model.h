// JSON mapping of the API's objects. The CLI and the server share it, so `--json` prints exactly
// what the API returns. Parsing is strict: unknown fields and wrong types are errors.
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "base/result.h"
#include "box/box.h"
#include "box/port_forward.h"
#include "box/snapshot.h"

namespace hutch::api {

using nlohmann::json;

using CreateBoxRequest = box::BoxSpec;

json toJson(const box::Box& box);
Result<box::Box> boxFromJson(const json& j);

json toJson(const CreateBoxRequest& request);
Result<CreateBoxRequest> parseCreateBox(std::string_view body);

// A box's lifetime as the API takes it: {"timeout_s": N, "on_timeout"?: "stop"|"suspend"|
// "remove"} (PUT /v1/boxes/{box}/timeout; also fields of a create request). timeout_s 0 means
// none; on_expiry kNone when on_timeout is absent.
struct Lifetime {
  int64_t timeout_s = 0;
  box::Expiry on_expiry = box::Expiry::kNone;
};
Result<Lifetime> parseLifetime(std::string_view body);

// POST /v1/boxes/{box}/fork: {"count": N, "names": [...]} (both optional).
Result<box::ForkSpec> parseFork(std::string_view body);
// POST /v1/boxes/{box}/checkpoints: {"name": "..."} (optional).
Result<std::string> parseCheckpoint(std::string_view body);
// POST /v1/boxes/{box}/rollback: {"checkpoint": "..."}.
Result<std::string> parseRollback(std::string_view body);

json toJson(const box::Snapshot& snapshot);
json toJson(const box::DiskUsage& usage);
json toJson(const box::PoolStatus& pool);

// Published ports. POST /v1/boxes/{box}/ports: {"host_port": N, "box_port": N, "address"?}
// (address defaults to 127.0.0.1). A port answer:
// {"box_id","address","host_port","box_port","listening","error","connections","accepted",
//  "created_at"}.
Result<box::PortForward> parsePortForward(std::string_view body);
json toJson(const box::PortForward& forward);  // the request body
json toJson(const box::PortStatus& status);
Result<box::PortStatus> portStatusFromJson(const json& j);

// {"error": {"code": "not_found", "message": "..."}}
json errorJson(const Error& error);
// The Error an error response body stands for (status used when the body is not ours).
Error errorFromResponse(int status, std::string_view body);

// Parses a JSON object body; a clear kInvalidArgument error for anything else.
Result<json> parseObject(std::string_view body);
// kInvalidArgument naming the first key of `j` not in `known`.
Result<> rejectUnknownFields(const json& j, const std::set<std::string>& known,
                             std::string_view what);
// Reads j[key] into out when present and not null; a wrong type is kInvalidArgument.
template <class T>
Result<> readField(const json& j, const char* key, T& out, std::string_view what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ok();
  auto wrongType = [&] {
    return fail(Errc::kInvalidArgument, fmt::format("Field '{}' in {} has the wrong type ({})", key,
                                                    what, it->type_name()));
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return wrongType();
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return wrongType();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return wrongType();
  }
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    return wrongType();
  }
  return ok();
}

}  // namespace hutch::api

// JSON mapping of the API's objects. The CLI and the server share it, so `--json` prints exactly
// what the API returns. Parsing is strict: unknown fields and wrong types are errors.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "box/box.h"

namespace hutch::api {

using nlohmann::json;

using CreateBoxRequest = box::BoxSpec;

json toJson(const box::Box& box);
Result<box::Box> boxFromJson(const json& j);

json toJson(const CreateBoxRequest& request);
Result<CreateBoxRequest> parseCreateBox(std::string_view body);

// {"error": {"code": "not_found", "message": "..."}}
json errorJson(const Error& error);
// The Error an error response body stands for (status used when the body is not ours).
Error errorFromResponse(int status, std::string_view body);

// Parses a JSON object body; a clear kInvalidArgument error for anything else.
Result<json> parseObject(std::string_view body);

}  // namespace hutch::api

// Internal to proto: the checked JSON field readers every message decoder uses. Readers never
// throw; a missing required field or a field of the wrong type is Errc::kProtocol.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::proto::detail {

using Json = nlohmann::json;

// Never throws: strings that are not valid UTF-8 are written with U+FFFD replacements.
std::string dump(const Json& j);

// payload as a JSON object; `what` names it in the error ("exec request").
Result<Json> parseObject(std::string_view payload, std::string_view what);

// Field readers: `required` false means a missing field leaves `out` unchanged.
Result<> readString(const Json& j, const char* key, bool required, std::string& out);
Result<> readBool(const Json& j, const char* key, bool required, bool& out);
Result<> readInt(const Json& j, const char* key, bool required, int64_t min, int64_t max,
                 std::optional<int64_t>& out);
Result<> readStringList(const Json& j, const char* key, bool required,
                        std::vector<std::string>& out);

bool hasNul(std::string_view s);

}  // namespace hutch::proto::detail

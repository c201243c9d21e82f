// Internal to proto: the non-template core of the message codec (proto/schema.h). It parses a
// payload and reads one JSON value as a field of a given type. Readers never throw; a missing
// required field, or a value of the wrong type or out of range, is Errc::kProtocol naming the
// field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::proto::detail {

using Json = nlohmann::json;

// The values an integer field accepts (the readers work in int64_t).
struct Range {
  int64_t min = 0;
  int64_t max = 0;
};

// Never throws: strings that are not valid UTF-8 are written with U+FFFD replacements.
std::string dump(const Json& j);

// payload as a JSON object; `what` names it in the error ("exec request").
Result<Json> parseObject(std::string_view payload, std::string_view what);

// "Missing field \"<field>\"" and "Field \"<field>\" <problem>", both Errc::kProtocol.
Error missingField(const char* field);
Error badField(const char* field, std::string_view problem);

// One field's value; `field` names it in the error.
Result<std::string> readString(const Json& value, const char* field);
Result<bool> readBool(const Json& value, const char* field);
Result<int64_t> readInt(const Json& value, const char* field, Range range);
Result<std::vector<std::string>> readStringList(const Json& value, const char* field);
// An array of integers in range; any other item is "Field \"<field>\" must hold <items>".
Result<std::vector<int64_t>> readIntList(const Json& value, const char* field, Range range,
                                         const char* items);
// An array (of objects): "Field \"<field>\" must be an array" otherwise.
Result<> checkArray(const Json& value, const char* field);
// An object nested in a message: "<what> must be a JSON object" otherwise.
Result<> checkObject(const Json& value, std::string_view what);

bool hasNul(std::string_view s);

}  // namespace hutch::proto::detail

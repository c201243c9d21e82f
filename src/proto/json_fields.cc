#include "proto/json_fields.h"

#include <limits>

namespace hutch::proto::detail {
namespace {

// The integer value of j, or nullopt when j is not an integer that fits in int64_t.
std::optional<int64_t> asInt64(const Json& j) {
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  return j.get<int64_t>();
}

}  // namespace

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<Json> parseObject(std::string_view payload, std::string_view what) {
  Json j = Json::parse(payload.begin(), payload.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return fail(Errc::kProtocol, "Malformed JSON in " + std::string(what));
  if (!j.is_object()) {
    return fail(Errc::kProtocol, std::string(what) + " must be a JSON object");
  }
  return j;
}

Error missingField(const char* field) {
  return Error(Errc::kProtocol, std::string("Missing field \"") + field + "\"");
}

Error badField(const char* field, std::string_view problem) {
  return Error(Errc::kProtocol, std::string("Field \"") + field + "\" " + std::string(problem));
}

Result<std::string> readString(const Json& value, const char* field) {
  if (!value.is_string()) return fail(badField(field, "must be a string"));
  return value.get_ref<const std::string&>();
}

Result<bool> readBool(const Json& value, const char* field) {
  if (!value.is_boolean()) return fail(badField(field, "must be a boolean"));
  return value.get<bool>();
}

Result<int64_t> readInt(const Json& value, const char* field, Range range) {
  if (!value.is_number_integer()) return fail(badField(field, "must be an integer"));
  const std::optional<int64_t> n = asInt64(value);
  if (!n || *n < range.min || *n > range.max) return fail(badField(field, "is out of range"));
  return *n;
}

Result<std::vector<std::string>> readStringList(const Json& value, const char* field) {
  if (!value.is_array()) return fail(badField(field, "must be an array of strings"));
  std::vector<std::string> values;
  values.reserve(value.size());
  for (const Json& item : value) {
    if (!item.is_string()) return fail(badField(field, "must be an array of strings"));
    values.push_back(item.get<std::string>());
  }
  return values;
}

Result<std::vector<int64_t>> readIntList(const Json& value, const char* field, Range range,
                                         const char* items) {
  HUTCH_TRY_VOID(checkArray(value, field));
  std::vector<int64_t> values;
  values.reserve(value.size());
  for (const Json& item : value) {
    const std::optional<int64_t> n =
        item.is_number_integer() ? asInt64(item) : std::optional<int64_t>();
    if (!n || *n < range.min || *n > range.max) {
      return fail(badField(field, std::string("must hold ") + items));
    }
    values.push_back(*n);
  }
  return values;
}

Result<> checkArray(const Json& value, const char* field) {
  if (!value.is_array()) return fail(badField(field, "must be an array"));
  return ok();
}

Result<> checkObject(const Json& value, std::string_view what) {
  if (!value.is_object())
    return fail(Errc::kProtocol, std::string(what) + " must be a JSON object");
  return ok();
}

bool hasNul(std::string_view s) {
  return s.find('\0') != std::string_view::npos;
}

}  // namespace hutch::proto::detail

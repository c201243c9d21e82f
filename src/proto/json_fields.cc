#include "proto/json_fields.h"

#include <limits>

namespace hutch::proto::detail {

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

Result<> readString(const Json& j, const char* key, bool required, std::string& out) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return fail(Errc::kProtocol, std::string("Missing field \"") + key + "\"");
    return ok();
  }
  if (!it->is_string()) {
    return fail(Errc::kProtocol, std::string("Field \"") + key + "\" must be a string");
  }
  out = it->get_ref<const std::string&>();
  return ok();
}

Result<> readBool(const Json& j, const char* key, bool required, bool& out) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return fail(Errc::kProtocol, std::string("Missing field \"") + key + "\"");
    return ok();
  }
  if (!it->is_boolean()) {
    return fail(Errc::kProtocol, std::string("Field \"") + key + "\" must be a boolean");
  }
  out = it->get<bool>();
  return ok();
}

Result<> readInt(const Json& j, const char* key, bool required, int64_t min, int64_t max,
                 std::optional<int64_t>& out) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return fail(Errc::kProtocol, std::string("Missing field \"") + key + "\"");
    return ok();
  }
  if (!it->is_number_integer()) {
    return fail(Errc::kProtocol, std::string("Field \"") + key + "\" must be an integer");
  }
  int64_t value = 0;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return fail(Errc::kProtocol, std::string("Field \"") + key + "\" is out of range");
    }
    value = static_cast<int64_t>(u);
  } else {
    value = it->get<int64_t>();
  }
  if (value < min || value > max) {
    return fail(Errc::kProtocol, std::string("Field \"") + key + "\" is out of range");
  }
  out = value;
  return ok();
}

Result<> readStringList(const Json& j, const char* key, bool required,
                        std::vector<std::string>& out) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return fail(Errc::kProtocol, std::string("Missing field \"") + key + "\"");
    return ok();
  }
  if (!it->is_array()) {
    return fail(Errc::kProtocol, std::string("Field \"") + key + "\" must be an array of strings");
  }
  std::vector<std::string> values;
  values.reserve(it->size());
  for (const Json& item : *it) {
    if (!item.is_string()) {
      return fail(Errc::kProtocol,
                  std::string("Field \"") + key + "\" must be an array of strings");
    }
    values.push_back(item.get<std::string>());
  }
  out = std::move(values);
  return ok();
}

bool hasNul(std::string_view s) {
  return s.find('\0') != std::string_view::npos;
}

}  // namespace hutch::proto::detail

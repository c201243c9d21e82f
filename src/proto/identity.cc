#include "proto/identity.h"

#include <limits>

#include "proto/json_fields.h"

namespace hutch::proto {
namespace {

using detail::Json;

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool isValidHostname(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '-' || name[0] == '.') return false;
  for (char c : name) {
    const bool good = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.';
    if (!good) return false;
  }
  return true;
}

bool isValidMachineId(std::string_view id) {
  if (id.size() != 32) return false;
  bool nonzero = false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    nonzero = nonzero || c != '0';
  }
  return nonzero;
}

std::string encodeHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char b : bytes) {
    const auto u = static_cast<unsigned char>(b);
    hex.push_back(kDigits[u >> 4]);
    hex.push_back(kDigits[u & 0xf]);
  }
  return hex;
}

Result<std::string> decodeHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return fail(Errc::kInvalidArgument, "Hex text has an odd length");
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hexValue(hex[i]);
    const int lo = hexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return fail(Errc::kInvalidArgument, "Hex text has a non-hex digit");
    bytes.push_back(static_cast<char>((hi << 4) | lo));
  }
  return bytes;
}

Result<> validate(const Identity& identity) {
  if (!identity.hostname.empty() && !isValidHostname(identity.hostname)) {
    return fail(Errc::kInvalidArgument,
                "Hostname \"" + identity.hostname +
                    "\" is not valid: use 1-64 letters, digits, '-' and '.', not starting with "
                    "'-' or '.'");
  }
  if (!identity.machine_id.empty() && !isValidMachineId(identity.machine_id)) {
    return fail(Errc::kInvalidArgument, "Machine id \"" + identity.machine_id +
                                            "\" is not 32 lowercase hex digits (not all zero)");
  }
  if (identity.time_ns && *identity.time_ns <= 0) {
    return fail(Errc::kInvalidArgument, "The time must be after 1970 (time_ns > 0)");
  }
  if (!identity.seed.empty()) {
    auto bytes = decodeHex(identity.seed);
    if (!bytes)
      return fail(Errc::kInvalidArgument, "The seed is not hex: " + bytes.error().message());
    if (bytes->size() < kMinSeedBytes || bytes->size() > kMaxSeedBytes) {
      return fail(Errc::kInvalidArgument, "The seed must be " + std::to_string(kMinSeedBytes) +
                                              "-" + std::to_string(kMaxSeedBytes) + " bytes, got " +
                                              std::to_string(bytes->size()));
    }
  }
  return ok();
}

std::string encodeMessage(const Identity& message) {
  Json j = Json::object();
  if (!message.hostname.empty()) j["hostname"] = message.hostname;
  if (!message.machine_id.empty()) j["machine_id"] = message.machine_id;
  if (message.time_ns) j["time_ns"] = *message.time_ns;
  if (!message.seed.empty()) j["seed"] = message.seed;
  if (message.grow_root) j["grow_root"] = true;
  return detail::dump(j);
}

std::string encodeMessage(const IdentityResult& message) {
  return detail::dump({{"root_bytes", message.root_bytes}, {"root_grown", message.root_grown}});
}

template <>
Result<Identity> decodeMessage<Identity>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "identity"));
  Identity identity;
  HUTCH_TRY_VOID(detail::readString(j, "hostname", false, identity.hostname));
  HUTCH_TRY_VOID(detail::readString(j, "machine_id", false, identity.machine_id));
  HUTCH_TRY_VOID(detail::readInt(j, "time_ns", false, std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max(), identity.time_ns));
  HUTCH_TRY_VOID(detail::readString(j, "seed", false, identity.seed));
  HUTCH_TRY_VOID(detail::readBool(j, "grow_root", false, identity.grow_root));
  // "network" is reserved for the box's addressing (not yet sent); unknown fields are ignored.
  HUTCH_TRY_VOID(validate(identity));
  return identity;
}

template <>
Result<IdentityResult> decodeMessage<IdentityResult>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "identity result"));
  std::optional<int64_t> root_bytes;
  HUTCH_TRY_VOID(
      detail::readInt(j, "root_bytes", false, 0, std::numeric_limits<int64_t>::max(), root_bytes));
  IdentityResult result;
  result.root_bytes = static_cast<uint64_t>(root_bytes.value_or(0));
  HUTCH_TRY_VOID(detail::readBool(j, "root_grown", false, result.root_grown));
  return result;
}

}  // namespace hutch::proto

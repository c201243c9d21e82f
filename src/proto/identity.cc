#include "proto/identity.h"

#include "proto/json_fields.h"
#include "proto/schema.h"

namespace hutch::proto {
namespace {

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

namespace detail {

// Every field is optional: what is absent is left as it is.
template <>
struct Schema<Identity> {
  static constexpr const char* kName = "identity";
  // "network" is reserved for the box's addressing (not yet sent).
  static constexpr auto kFields = std::tuple(field("hostname", &Identity::hostname, kOmitEmpty),
                                             field("machine_id", &Identity::machine_id, kOmitEmpty),
                                             field("time_ns", &Identity::time_ns, kOmitEmpty),
                                             field("seed", &Identity::seed, kOmitEmpty),
                                             field("grow_root", &Identity::grow_root, kOmitEmpty));
  static Result<> check(const Identity& identity) { return validate(identity); }
};

template <>
struct Schema<IdentityResult> {
  static constexpr const char* kName = "identity result";
  static constexpr auto kFields =
      std::tuple(field("root_bytes", &IdentityResult::root_bytes, kOptional),
                 field("root_grown", &IdentityResult::root_grown, kOptional));
};

}  // namespace detail

HUTCH_PROTO_CODEC(Identity)
HUTCH_PROTO_CODEC(IdentityResult)

}  // namespace hutch::proto

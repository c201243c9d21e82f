// kIdentity: what a box must not share with the snapshot it was restored from (docs/protocol.md,
// "Identity"). The host sends it right after the handshake of a restored box; the agent sets the
// clock, reseeds the kernel RNG, writes the machine id and hostname and, if asked, grows the root
// filesystem onto a disk the host has just enlarged. Every field is optional: what is absent is
// left as it is. Applying the same identity twice is harmless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "proto/messages.h"

namespace hutch::proto {

// The seed is 32 to 64 random bytes, sent as lowercase or uppercase hex.
inline constexpr size_t kMinSeedBytes = 32;
inline constexpr size_t kMaxSeedBytes = 64;

// kIdentity, host->guest, on a fresh stream; answered with kResult (IdentityResult) or kError.
struct Identity {
  std::string hostname;            // empty: unchanged
  std::string machine_id;          // 32 lowercase hex digits; empty: unchanged
  std::optional<int64_t> time_ns;  // the host's CLOCK_REALTIME in ns since the epoch
  std::string seed;                // hex of kMinSeedBytes..kMaxSeedBytes random bytes; empty: none
  // The host has just enlarged the disk (QMP block_resize): wait up to ~3 s for the guest to see
  // the new size, then grow the root ext4 filesystem onto it.
  bool grow_root = false;

  bool operator==(const Identity&) const = default;
};

// kResult for kIdentity.
struct IdentityResult {
  // With grow_root: the size of the root filesystem in bytes afterwards, and whether it grew
  // (false: the disk did not become larger than the filesystem within the wait).
  uint64_t root_bytes = 0;
  bool root_grown = false;

  bool operator==(const IdentityResult&) const = default;
};

// 1-64 characters of [A-Za-z0-9-.], not starting with '-' or '.' (as hutch.hostname= at boot).
bool isValidHostname(std::string_view name);
// 32 lowercase hex digits, not all zero (the format of /etc/machine-id).
bool isValidMachineId(std::string_view id);

// Checks the values (both sides call it). Bad values are kInvalidArgument.
Result<> validate(const Identity& identity);

// Lowercase hex of bytes, and back (either case); decodeHex fails on odd lengths and non-hex.
std::string encodeHex(std::string_view bytes);
Result<std::string> decodeHex(std::string_view hex);

std::string encodeMessage(const Identity& message);
std::string encodeMessage(const IdentityResult& message);
template <>
Result<Identity> decodeMessage<Identity>(std::string_view payload);
template <>
Result<IdentityResult> decodeMessage<IdentityResult>(std::string_view payload);

}  // namespace hutch::proto

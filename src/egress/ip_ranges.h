// The special IP address ranges hutch-egress never connects to by default, and IP networks
// (CIDR) for the policy's "allow_private" field. A plain value library without I/O: the policy
// parser validates "allow_private" with it, the proxy's AddressFilter judges every upstream
// address with it.
//
// Special ranges come in three kinds:
//   kMetadata: cloud instance metadata and host agents (169.254.169.254, 100.100.100.200,
//              168.63.129.16, fd00:ec2::254, ...): never reachable, whatever the policy says.
//   kLocal:    loopback, link-local, unspecified, multicast, broadcast, reserved, benchmarking,
//              IETF protocol assignments, transition mechanisms that hide an address (Teredo):
//              never reachable either.
//   kPrivate:  RFC 1918, shared address space (100.64.0.0/10, CGNAT) and unique local IPv6
//              (fc00::/7): refused unless a policy's "allow_private" lists a network holding
//              the address (a LAN mirror, say).
// Addresses that embed an IPv4 address (IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96, 6to4
// 2002::/16) are judged as that IPv4 address. Documentation ranges (192.0.2.0/24,
// 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) are ordinary addresses.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::egress {

// An IPv4 or IPv6 address as 16 bytes; an IPv4 address is kept IPv4-mapped (::ffff:a.b.c.d).
struct IpAddress {
  std::array<uint8_t, 16> bytes{};

  static IpAddress v4(uint32_t value);
  static IpAddress v6(const std::array<uint8_t, 16>& bytes);  // a mapped address becomes v4
  // "192.0.2.1", "2001:db8::1" (no brackets, no zone); nullopt for anything else.
  static std::optional<IpAddress> parse(std::string_view text);

  bool isV4() const;
  uint32_t v4Value() const;  // isV4() only
  std::string text() const;
  bool operator==(const IpAddress&) const = default;
};

// address/prefix; the prefix counts bits of the family (0..32 for IPv4, 0..128 for IPv6).
struct IpNetwork {
  IpAddress base;
  unsigned prefix = 0;

  bool isV4() const { return base.isV4(); }
  bool contains(const IpAddress& address) const;
  // Every address of `other` is in this network.
  bool contains(const IpNetwork& other) const;
  std::string text() const;  // "192.168.1.0/24"
  bool operator==(const IpNetwork&) const = default;
};

// "192.168.1.0/24", "fd12:3456::/48", or one address ("192.168.1.7" = /32, /128). Errors
// (kInvalidArgument) say what is wrong: not an address, a prefix out of range, host bits set.
Result<IpNetwork> parseIpNetwork(std::string_view text);

enum class RangeKind { kMetadata, kLocal, kPrivate };

struct SpecialRange {
  std::string name;  // "loopback", "link-local", "private (RFC 1918)", "cloud metadata", ...
  RangeKind kind = RangeKind::kLocal;
  IpNetwork network;  // the range itself (for an embedded IPv4 address, the IPv4 range)
};

// The special range `address` is in, or nullopt for an ordinary (global unicast) address.
std::optional<SpecialRange> specialRange(const IpAddress& address);

// The ranges of kind kPrivate, for messages ("10.0.0.0/8, 172.16.0.0/12, ...").
std::vector<IpNetwork> privateRanges();

}  // namespace hutch::egress

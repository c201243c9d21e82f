#include "egress/ip_ranges.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace hutch::egress {

namespace {

constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// The IPv4 address in the last four bytes.
uint32_t low32(const std::array<uint8_t, 16>& b) {
  return (uint32_t{b[12]} << 24) | (uint32_t{b[13]} << 16) | (uint32_t{b[14]} << 8) | b[15];
}

IpNetwork net4(uint32_t base, unsigned prefix) {
  return IpNetwork{IpAddress::v4(base), prefix};
}

IpNetwork net6(std::string_view text, unsigned prefix) {
  auto address = IpAddress::parse(text);
  return IpNetwork{address.value_or(IpAddress{}), prefix};
}

constexpr uint32_t ip4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

struct Entry {
  IpNetwork network;
  std::string_view name;
  RangeKind kind;
};

// Most specific first where ranges nest: the first match names the address.
const std::vector<Entry>& v4Table() {
  static const std::vector<Entry> table = {
      {net4(ip4(169, 254, 169, 254), 32), "cloud metadata", RangeKind::kMetadata},
      {net4(ip4(169, 254, 170, 2), 32), "cloud metadata (container credentials)",
       RangeKind::kMetadata},
      {net4(ip4(100, 100, 100, 200), 32), "cloud metadata", RangeKind::kMetadata},
      {net4(ip4(168, 63, 129, 16), 32), "cloud host agent (168.63.129.16)", RangeKind::kMetadata},
      {net4(ip4(0, 0, 0, 0), 8), "unspecified", RangeKind::kLocal},
      {net4(ip4(10, 0, 0, 0), 8), "private (RFC 1918)", RangeKind::kPrivate},
      {net4(ip4(100, 64, 0, 0), 10), "shared address space (CGNAT, RFC 6598)", RangeKind::kPrivate},
      {net4(ip4(127, 0, 0, 0), 8), "loopback", RangeKind::kLocal},
      {net4(ip4(169, 254, 0, 0), 16), "link-local", RangeKind::kLocal},
      {net4(ip4(172, 16, 0, 0), 12), "private (RFC 1918)", RangeKind::kPrivate},
      {net4(ip4(192, 0, 0, 0), 24), "IETF protocol assignments (192.0.0.0/24)", RangeKind::kLocal},
      {net4(ip4(192, 88, 99, 0), 24), "6to4 relay anycast", RangeKind::kLocal},
      {net4(ip4(192, 168, 0, 0), 16), "private (RFC 1918)", RangeKind::kPrivate},
      {net4(ip4(198, 18, 0, 0), 15), "benchmarking (198.18.0.0/15)", RangeKind::kLocal},
      {net4(ip4(224, 0, 0, 0), 4), "multicast", RangeKind::kLocal},
      {net4(ip4(255, 255, 255, 255), 32), "broadcast", RangeKind::kLocal},
      {net4(ip4(240, 0, 0, 0), 4), "reserved (240.0.0.0/4)", RangeKind::kLocal},
  };
  return table;
}

const std::vector<Entry>& v6Table() {
  static const std::vector<Entry> table = {
      {net6("fd00:ec2::254", 128), "cloud metadata", RangeKind::kMetadata},
      {net6("::", 128), "unspecified", RangeKind::kLocal},
      {net6("::1", 128), "loopback", RangeKind::kLocal},
      {net6("::", 96), "IPv4-compatible (deprecated)", RangeKind::kLocal},
      {net6("::ffff:0:0:0", 96), "IPv4-translated (SIIT)", RangeKind::kLocal},
      {net6("64:ff9b:1::", 48), "local-use NAT64 (64:ff9b:1::/48)", RangeKind::kLocal},
      {net6("100::", 64), "discard-only (100::/64)", RangeKind::kLocal},
      {net6("2001::", 32), "Teredo (2001::/32)", RangeKind::kLocal},
      {net6("fc00::", 7), "unique local (fc00::/7)", RangeKind::kPrivate},
      {net6("fe80::", 10), "link-local", RangeKind::kLocal},
      {net6("fec0::", 10), "site-local (deprecated)", RangeKind::kLocal},
      {net6("ff00::", 8), "multicast", RangeKind::kLocal},
  };
  return table;
}

std::optional<SpecialRange> lookup(const std::vector<Entry>& table, const IpAddress& address) {
  for (const Entry& e : table) {
    if (e.network.contains(address)) return SpecialRange{std::string(e.name), e.kind, e.network};
  }
  return std::nullopt;
}

}  // namespace

IpAddress IpAddress::v4(uint32_t value) {
  IpAddress a;
  std::copy(kMappedPrefix.begin(), kMappedPrefix.end(), a.bytes.begin());
  a.bytes[12] = static_cast<uint8_t>(value >> 24);
  a.bytes[13] = static_cast<uint8_t>(value >> 16);
  a.bytes[14] = static_cast<uint8_t>(value >> 8);
  a.bytes[15] = static_cast<uint8_t>(value);
  return a;
}

IpAddress IpAddress::v6(const std::array<uint8_t, 16>& bytes) {
  IpAddress a;
  a.bytes = bytes;
  return a;
}

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  std::string s(text);
  in_addr v4{};
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) return IpAddress::v4(ntohl(v4.s_addr));
  in6_addr v6{};
  if (inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    std::array<uint8_t, 16> bytes{};
    std::memcpy(bytes.data(), v6.s6_addr, bytes.size());
    return IpAddress::v6(bytes);
  }
  return std::nullopt;
}

bool IpAddress::isV4() const {
  return std::equal(kMappedPrefix.begin(), kMappedPrefix.end(), bytes.begin());
}

uint32_t IpAddress::v4Value() const {
  return low32(bytes);
}

std::string IpAddress::text() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (isV4()) {
    in_addr v4{};
    v4.s_addr = htonl(v4Value());
    inet_ntop(AF_INET, &v4, buf, sizeof buf);
  } else {
    in6_addr v6{};
    std::memcpy(v6.s6_addr, bytes.data(), bytes.size());
    inet_ntop(AF_INET6, &v6, buf, sizeof buf);
  }
  return buf;
}

bool IpNetwork::contains(const IpAddress& address) const {
  if (address.isV4() != isV4()) return false;
  unsigned bits = isV4() ? prefix + 96 : prefix;
  for (unsigned i = 0; i < 16; ++i) {
    unsigned take = bits >= (i + 1) * 8 ? 8 : (bits > i * 8 ? bits - i * 8 : 0);
    if (take == 0) break;
    auto mask = static_cast<uint8_t>(0xff << (8 - take));
    if ((address.bytes[i] & mask) != (base.bytes[i] & mask)) return false;
  }
  return true;
}

bool IpNetwork::contains(const IpNetwork& other) const {
  return other.isV4() == isV4() && other.prefix >= prefix && contains(other.base);
}

std::string IpNetwork::text() const {
  return fmt::format("{}/{}", base.text(), prefix);
}

Result<IpNetwork> parseIpNetwork(std::string_view text) {
  std::string_view address_text = text;
  std::optional<unsigned> prefix;
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    address_text = text.substr(0, slash);
    std::string_view digits = text.substr(slash + 1);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("\"{}\" has no prefix length after '/': write it like "
                              "192.168.1.0/24 or fd12:3456::/48",
                              text));
    }
    prefix = value;
  }
  auto address = IpAddress::parse(address_text);
  if (!address) {
    return fail(Errc::kInvalidArgument,
                fmt::format("\"{}\" is not an IP network: write it like 192.168.1.0/24 or "
                            "fd12:3456::/48",
                            text));
  }
  unsigned max = address->isV4() ? 32 : 128;
  if (!prefix) prefix = max;
  if (*prefix > max) {
    return fail(Errc::kInvalidArgument,
                fmt::format("\"{}\": the prefix length must be 0..{}", text, max));
  }
  IpNetwork network{*address, *prefix};
  // The network's own base: every bit past the prefix cleared.
  IpNetwork cleared = network;
  unsigned bits = address->isV4() ? *prefix + 96 : *prefix;
  for (unsigned i = 0; i < 16; ++i) {
    unsigned keep = bits >= (i + 1) * 8 ? 8 : (bits > i * 8 ? bits - i * 8 : 0);
    cleared.base.bytes[i] &= static_cast<uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
  }
  if (!(cleared.base == network.base)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("\"{}\" has bits set past its prefix: write {}", text, cleared.text()));
  }
  return network;
}

std::optional<SpecialRange> specialRange(const IpAddress& address) {
  if (address.isV4()) return lookup(v4Table(), address);
  if (auto found = lookup(v6Table(), address)) return found;
  // Transition forms that carry an IPv4 address: judged as that address.
  const auto& b = address.bytes;
  static const IpNetwork kNat64 = net6("64:ff9b::", 96);
  static const IpNetwork k6to4 = net6("2002::", 16);
  std::optional<IpAddress> embedded;
  std::string via;
  if (kNat64.contains(address)) {
    embedded = IpAddress::v4(low32(b));
    via = "NAT64 of ";
  } else if (k6to4.contains(address)) {
    embedded = IpAddress::v4((uint32_t{b[2]} << 24) | (uint32_t{b[3]} << 16) |
                             (uint32_t{b[4]} << 8) | b[5]);
    via = "6to4 of ";
  }
  if (!embedded) return std::nullopt;
  auto inner = lookup(v4Table(), *embedded);
  if (!inner) return std::nullopt;
  inner->name = via + embedded->text() + ", " + inner->name;
  // "allow_private" opens IPv4 networks only as themselves, never through a translator.
  if (inner->kind == RangeKind::kPrivate) inner->kind = RangeKind::kLocal;
  return inner;
}

std::vector<IpNetwork> privateRanges() {
  std::vector<IpNetwork> out;
  for (const auto* table : {&v4Table(), &v6Table()}) {
    for (const Entry& e : *table) {
      if (e.kind == RangeKind::kPrivate) out.push_back(e.network);
    }
  }
  return out;
}

}  // namespace hutch::egress

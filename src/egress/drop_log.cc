#include "egress/drop_log.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>

#include <algorithm>
#include <cstring>

namespace hutch::egress {

namespace {

constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86dd;

uint16_t be16(std::span<const uint8_t> p, size_t at) {
  return static_cast<uint16_t>((p[at] << 8) | p[at + 1]);
}

template <class T>
T host(std::span<const uint8_t> p, size_t at) {
  T value{};
  std::memcpy(&value, p.data() + at, sizeof value);
  return value;
}

std::string icmpName(uint8_t type) {
  switch (type) {
    case 0: return "echo-reply";
    case 3: return "destination-unreachable";
    case 5: return "redirect";
    case 8: return "echo-request";
    case 11: return "time-exceeded";
    case 13: return "timestamp-request";
    default: return fmt::format("type {}", type);
  }
}

std::string icmpv6Name(uint8_t type) {
  switch (type) {
    case 1: return "destination-unreachable";
    case 2: return "packet-too-big";
    case 3: return "time-exceeded";
    case 128: return "echo-request";
    case 129: return "echo-reply";
    case 133: return "router-solicit";
    case 135: return "neighbor-solicit";
    case 136: return "neighbor-advert";
    default: return fmt::format("type {}", type);
  }
}

std::string addressText(int family, const uint8_t* bytes) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, bytes, buf, sizeof buf);
  return buf;
}

// The transport protocol `proto` at `at` of `p` (at == p.size(): no header there).
void transport(std::span<const uint8_t> p, size_t at, uint8_t proto, bool v6, DroppedPacket& out) {
  switch (proto) {
    case IPPROTO_UDP:
    case IPPROTO_TCP:
      out.proto = proto == IPPROTO_UDP ? "udp" : "tcp";
      if (at + 4 <= p.size()) out.port = be16(p, at + 2);
      return;
    case IPPROTO_ICMP:
      if (v6) break;
      out.proto = "icmp";
      if (at < p.size()) out.detail = icmpName(p[at]);
      return;
    case IPPROTO_ICMPV6:
      if (!v6) break;
      out.proto = "icmpv6";
      if (at < p.size()) out.detail = icmpv6Name(p[at]);
      return;
    default: break;
  }
  out.proto = "ip";
  out.detail = fmt::format("protocol {}", proto);
}

// The destination of an IP packet (its first bytes, as NFLOG copied them).
DroppedPacket fromPayload(uint16_t ethertype, std::span<const uint8_t> p) {
  DroppedPacket out;
  if (ethertype == 0 && !p.empty()) {
    ethertype = (p[0] >> 4) == 4 ? kEtherIpv4 : (p[0] >> 4) == 6 ? kEtherIpv6 : 0;
  }
  if (ethertype == kEtherIpv4 && p.size() >= 20 && (p[0] >> 4) == 4) {
    size_t header = static_cast<size_t>(p[0] & 0x0f) * 4;
    out.address = addressText(AF_INET, p.data() + 16);
    bool later_fragment = (be16(p, 6) & 0x1fff) != 0;
    transport(p, later_fragment ? p.size() : std::min(header, p.size()), p[9], false, out);
    return out;
  }
  if (ethertype == kEtherIpv6 && p.size() >= 40 && (p[0] >> 4) == 6) {
    out.address = addressText(AF_INET6, p.data() + 24);
    uint8_t next = p[6];
    size_t at = 40;
    // Extension headers before the transport header: hop-by-hop, routing, destination options,
    // fragment.
    for (int i = 0; i < 8 && at + 8 <= p.size(); ++i) {
      if (next == 0 || next == 43 || next == 60) {
        size_t len = (static_cast<size_t>(p[at + 1]) + 1) * 8;
        next = p[at];
        at += len;
      } else if (next == 44) {
        bool later_fragment = (be16(p, at + 2) & 0xfff8) != 0;
        next = p[at];
        at = later_fragment ? p.size() : at + 8;
      } else {
        break;
      }
    }
    transport(p, std::min(at, p.size()), next, true, out);
    return out;
  }
  out.proto = "ether";
  out.detail = fmt::format("ethertype 0x{:04x}", ethertype);
  return out;
}

}  // namespace

std::vector<DroppedPacket> parseNflogDatagram(std::span<const uint8_t> d) {
  std::vector<DroppedPacket> out;
  size_t at = 0;
  while (at + sizeof(nlmsghdr) <= d.size()) {
    auto hdr = host<nlmsghdr>(d, at);
    if (hdr.nlmsg_len < sizeof(nlmsghdr) || at + hdr.nlmsg_len > d.size()) break;
    std::span<const uint8_t> msg = d.subspan(at, hdr.nlmsg_len);
    at += NLMSG_ALIGN(hdr.nlmsg_len);
    if (hdr.nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET)) continue;
    size_t attr = sizeof(nlmsghdr) + sizeof(nfgenmsg);
    uint16_t ethertype = 0;
    std::span<const uint8_t> payload;
    bool malformed = false;
    while (attr + sizeof(nlattr) <= msg.size()) {
      auto a = host<nlattr>(msg, attr);
      if (a.nla_len < sizeof(nlattr) || attr + a.nla_len > msg.size()) {
        malformed = true;
        break;
      }
      std::span<const uint8_t> value =
          msg.subspan(attr + sizeof(nlattr), a.nla_len - sizeof(nlattr));
      switch (a.nla_type & NLA_TYPE_MASK) {
        case NFULA_PACKET_HDR:
          if (value.size() >= 2) ethertype = be16(value, 0);
          break;
        case NFULA_PAYLOAD: payload = value; break;
        default: break;
      }
      attr += NLA_ALIGN(a.nla_len);
    }
    if (malformed) break;
    out.push_back(fromPayload(ethertype, payload));
  }
  return out;
}

void describeDrop(const DroppedPacket& packet, LogEntry& entry) {
  entry.proto = packet.proto;
  entry.address = packet.address;
  entry.port = packet.port;
  entry.allowed = false;
  std::string what;
  if (packet.proto == "udp" || packet.proto == "tcp") {
    std::string upper = packet.proto == "udp" ? "UDP" : "TCP over IPv6";
    what = fmt::format("{} to port {}", upper, packet.port);
  } else if (packet.proto == "icmp" || packet.proto == "icmpv6") {
    what = fmt::format("{} {}", packet.proto == "icmp" ? "ICMP" : "ICMPv6", packet.detail);
  } else if (packet.proto == "ip") {
    what = "IP " + packet.detail;
  } else {
    what = packet.detail;
  }
  entry.reason = fmt::format(
      "dropped by the box's network ({}): only TCP through the proxy and DNS on UDP port 53 "
      "leave a box",
      what);
}

DropLimiter::DropLimiter(uint32_t burst, int64_t interval_ms)
    : burst_(burst),
      interval_ms_(std::max<int64_t>(interval_ms, 1)),
      capacity_ms_(static_cast<int64_t>(burst) * interval_ms_),
      budget_ms_(capacity_ms_) {}

bool DropLimiter::admit(int64_t now_ms) {
  if (last_ms_ >= 0 && now_ms > last_ms_) {
    budget_ms_ = std::min(capacity_ms_, budget_ms_ + (now_ms - last_ms_));
  }
  if (last_ms_ < 0 || now_ms > last_ms_) last_ms_ = now_ms;
  if (budget_ms_ >= interval_ms_) {
    budget_ms_ -= interval_ms_;
    return true;
  }
  ++suppressed_;
  return false;
}

uint64_t DropLimiter::takeSuppressed() {
  uint64_t n = suppressed_;
  suppressed_ = 0;
  return n;
}

std::string DropLimiter::summaryReason(uint64_t count) const {
  return fmt::format(
      "dropped by the box's network: at least {} more packet{} not logged one by one (a box's "
      "drops are logged {} at once, then one every {} ms)",
      count, count == 1 ? " was" : "s were", burst_, interval_ms_);
}

}  // namespace hutch::egress

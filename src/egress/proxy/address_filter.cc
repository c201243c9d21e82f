#include "egress/proxy/address_filter.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace hutch::egress::proxy {

namespace {

using asio::ip::address;
using asio::ip::address_v4;
using asio::ip::address_v6;

address normalise(const address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}

}  // namespace

IpAddress toIpAddress(const address& a) {
  if (a.is_v4()) return IpAddress::v4(a.to_v4().to_uint());
  return IpAddress::v6(a.to_v6().to_bytes());
}

std::vector<address> hostInterfaceAddresses() {
  std::vector<address> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      out.emplace_back(address_v4(ntohl(sin->sin_addr.s_addr)));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      address_v6::bytes_type bytes;
      std::memcpy(bytes.data(), sin6->sin6_addr.s6_addr, bytes.size());
      out.emplace_back(address_v6(bytes));  // scope dropped: compared by address only
    }
  }
  freeifaddrs(list);
  return out;
}

AddressFilter::AddressFilter() : own_(&hostInterfaceAddresses) {}

AddressFilter::AddressFilter(OwnAddresses own) : own_(std::move(own)) {}

AddressFilter AddressFilter::allowingLoopbackForTests() {
  AddressFilter filter;
  filter.allow_loopback_ = true;
  return filter;
}

std::optional<std::string> AddressFilter::refusal(
    const address& raw, const std::vector<IpNetwork>& allow_private) const {
  address a = normalise(raw);
  if (allow_loopback_ && a.is_loopback()) return std::nullopt;
  IpAddress ip = toIpAddress(a);
  if (auto range = specialRange(ip)) {
    bool opened = range->kind == RangeKind::kPrivate &&
                  std::any_of(allow_private.begin(), allow_private.end(),
                              [&](const IpNetwork& n) { return n.contains(ip); });
    if (!opened) return range->name;
  }
  if (own_) {
    for (const address& own : own_()) {
      if (normalise(own) == a) return "an address of this host";
    }
  }
  return std::nullopt;
}

}  // namespace hutch::egress::proxy

// Which upstream addresses hutch-egress may connect to. A box names a host; the name resolves to
// addresses; an address that would reach this host itself, a local-only or private network or a
// cloud metadata service is refused, whatever the policy's names say (a DNS name pointed at
// 127.0.0.1, 169.254.169.254 or 10.0.0.1 must not open hutchd's ports, the metadata service or
// the LAN). The ranges are egress/ip_ranges.h's; a policy's "allow_private" may open private
// networks, nothing else.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "egress/ip_ranges.h"
#include "egress/proxy/asio.h"

namespace hutch::egress::proxy {

class AddressFilter {
 public:
  using OwnAddresses = std::function<std::vector<asio::ip::address>()>;

  // The default: strict, with this host's interface addresses read by getifaddrs() at each
  // check (interfaces come and go).
  AddressFilter();
  // Strict, with the host's own addresses from `own` (tests).
  explicit AddressFilter(OwnAddresses own);
  // For tests only: like the default but loopback addresses pass (servers on 127.0.0.1).
  static AddressFilter allowingLoopbackForTests();

  // Why `address` is refused (the range's name from ip_ranges.h: "loopback", "link-local",
  // "cloud metadata", "private (RFC 1918)", ...; or "an address of this host"), or nullopt
  // when it may be used. A private address passes when a network of `allow_private` holds it.
  // IPv4-mapped, NAT64 and 6to4 addresses are judged as the IPv4 address they carry.
  std::optional<std::string> refusal(const asio::ip::address& address,
                                     const std::vector<IpNetwork>& allow_private = {}) const;

 private:
  OwnAddresses own_;
  bool allow_loopback_ = false;
};

// The addresses of this host's interfaces (getifaddrs), IPv4 and IPv6.
std::vector<asio::ip::address> hostInterfaceAddresses();

// The ip_ranges.h form of an asio address (IPv4-mapped IPv6 becomes IPv4).
IpAddress toIpAddress(const asio::ip::address& address);

}  // namespace hutch::egress::proxy

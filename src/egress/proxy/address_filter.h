// Which upstream addresses hutch-egress may connect to. A box names a host; the name resolves to
// addresses; an address that would reach this host itself or a local-only network is refused,
// whatever the policy says (a DNS name pointed at 127.0.0.1 must not open hutchd's ports).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

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

  // Why `address` is refused ("loopback", "link-local", "unspecified", "multicast",
  // "broadcast", "an address of this host"), or nullopt when it may be used. IPv4-mapped IPv6
  // addresses are judged as the IPv4 address they carry.
  std::optional<std::string> refusal(const asio::ip::address& address) const;

 private:
  OwnAddresses own_;
  bool allow_loopback_ = false;
};

// The addresses of this host's interfaces (getifaddrs), IPv4 and IPv6.
std::vector<asio::ip::address> hostInterfaceAddresses();

}  // namespace hutch::egress::proxy

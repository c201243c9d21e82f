// A box's network: its own namespace holding one tap device (the VM's NIC) whose only reachable
// peers are hutch's DNS resolver and egress proxy, through sockets hutchd makes inside the
// namespace and hands to hutch-egress (src/egress/README.md). The namespace has no route and no
// other device, so other boxes, the host and the internet are not reachable at all; nftables
// redirects what the box sends to those sockets, and drops the rest and logs it (NFLOG, read by
// hutch-egress into the box's policy log).
//
// Every box sees the same addresses (below): namespaces keep them apart, and a snapshot taken
// in one box stays valid in another.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::net {

inline constexpr const char* kTapName = "tap0";
inline constexpr const char* kGuestMac = "52:54:00:12:34:56";
inline constexpr const char* kGuestAddress = "10.0.2.15/24";
inline constexpr const char* kGateway = "10.0.2.2";  // tap0's address: resolver and proxy
// tap0's MAC, the same in every box's namespace: a guest resumed from a suspend or restored from
// a snapshot keeps the gateway in its ARP cache, and a new tap with another MAC would leave it
// talking to nobody until the entry expired. (Locally administered: "\x02hutch".)
inline constexpr const char* kGatewayMac = "02:68:75:74:63:68";
inline constexpr uint16_t kDnsPort = 53;
inline constexpr uint16_t kExplicitProxyPort = 3128;
inline constexpr uint16_t kTransparentPort = 15001;

// The nftables ruleset of every box namespace (applied with `nft -f`).
std::string boxRuleset();
// The `ip -batch` commands that make tap0 and bring it and lo up.
std::string linkCommands();

// The sockets hutch-egress serves a box with, made inside its namespace, in the order the
// control protocol sends them.
struct Listeners {
  UniqueFd explicit_proxy;  // TCP 10.0.2.2:3128
  UniqueFd transparent;     // TCP 0.0.0.0:15001 (nftables redirects other TCP here)
  UniqueFd dns;             // UDP 10.0.2.2:53
  // NETLINK_NETFILTER, bound to NFLOG group egress::kDropLogGroup: the packets the tap's chain
  // dropped (configured by hutchd, which needs CAP_NET_ADMIN for it; reading needs nothing).
  UniqueFd drops;
  std::optional<Error> drops_error;  // why `drops` is missing (the rest works without it)
};

class BoxNetworks {
 public:
  // prefix names the namespaces ("hutch-" + something unique to this hutchd's uid range);
  // dir (root's, e.g. <state>/net) keeps the files ip and nft read.
  static Result<BoxNetworks> create(std::string prefix, const std::filesystem::path& dir);

  std::string nameFor(uint32_t index) const { return prefix_ + std::to_string(index); }
  std::filesystem::path pathFor(uint32_t index) const;

  // Makes the namespace for a VM's uid index afresh (an old one of that index is deleted
  // first): tap0, addresses, the ruleset. Blocking (runs ip and nft).
  Result<std::filesystem::path> prepare(uint32_t index) const;
  // Deletes it (nothing if it does not exist).
  Result<> release(uint32_t index) const;
  // Makes the four sockets inside an existing namespace.
  Result<Listeners> listeners(uint32_t index) const;
  // Namespaces of this prefix whose index is not in `keep` are deleted.
  void removeOrphans(const std::vector<uint32_t>& keep) const;

 private:
  BoxNetworks() = default;
  std::string prefix_;
  std::filesystem::path links_;
  std::filesystem::path rules_;
};

}  // namespace hutch::net

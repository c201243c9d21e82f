// The box's NIC, set up at boot from the kernel command line the host wrote:
//   hutch.ip=10.0.2.15/24 hutch.gw=10.0.2.2 hutch.dns=10.0.2.2
// eth0 gets the address and comes up, the default route goes to the gateway (hutch's proxy and
// resolver, the only peers a box has) and /etc/resolv.conf names the resolver. No parameters: no
// NIC configuration (the host gave the box no network).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::agent {

struct NetConfig {
  std::string device = "eth0";
  uint32_t address = 0;  // host byte order
  unsigned prefix = 24;
  uint32_t gateway = 0;
  uint32_t dns = 0;
  bool operator==(const NetConfig&) const = default;
};

// nullopt when the command line has no hutch.ip; an error when the values are malformed.
Result<std::optional<NetConfig>> parseNetConfig(std::string_view cmdline);
// The /etc/resolv.conf text for `config`.
std::string resolvConf(const NetConfig& config);
// Configures the device, the default route and writes `resolv_conf` (/etc/resolv.conf).
Result<> applyNetConfig(const NetConfig& config,
                        const std::string& resolv_conf = "/etc/resolv.conf");

}  // namespace hutch::agent

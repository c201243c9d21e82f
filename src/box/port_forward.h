// A published port as a value: a host address and port forwarded to a TCP port inside a box,
// over the box's agent channel (no network between host and box is involved). The store keeps
// them per box; PortForwards (port_forwards.h) runs their listeners.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::box {

inline constexpr std::string_view kDefaultPortAddress = "127.0.0.1";

struct PortForward {
  std::string box_id;
  std::string host_address{kDefaultPortAddress};  // an IPv4 or IPv6 literal the host listens on
  uint16_t host_port = 0;
  uint16_t box_port = 0;
  int64_t created_at = 0;  // unix seconds

  bool operator==(const PortForward&) const = default;
};

// A forward and whether it is live.
struct PortStatus {
  PortForward forward;
  bool listening = false;    // a listener is open on the host
  std::string error;         // why the listener could not be opened (port taken meanwhile)
  uint64_t connections = 0;  // open connections right now
  uint64_t accepted = 0;     // connections accepted since the listener opened
};

// Parses Docker's -p syntax: "HOSTPORT:BOXPORT", "ADDR:HOSTPORT:BOXPORT" or
// "[IPV6]:HOSTPORT:BOXPORT" (a "/tcp" suffix is accepted; "/udp" is not supported). The
// address defaults to 127.0.0.1. kInvalidArgument with the rule for anything else.
Result<PortForward> parsePortSpec(std::string_view text);

// Checks ports (1-65535) and that the address is an IP literal; normalises the address.
Result<> validatePortForward(PortForward& forward);

// "127.0.0.1:8080", "[::1]:8080": how a host endpoint is written in messages and tables.
std::string hostEndpoint(const PortForward& forward);

// Whether two host endpoints would collide: the same port on the same address, or on any
// address when either is a wildcard (0.0.0.0, ::).
bool sameHostPort(const PortForward& a, const PortForward& b);

}  // namespace hutch::box

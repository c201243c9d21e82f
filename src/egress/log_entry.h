// One line of a box's policy log: a connection or a DNS question, what was decided, and bytes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hutch::egress {

struct LogEntry {
  std::string box;      // box id
  int64_t time_ms = 0;  // unix time in milliseconds, when decided
  // "dns" (a question), "http" (plain HTTP, transparent or through the explicit proxy),
  // "https" (TLS seen by SNI, tunnelled or intercepted), "connect" (CONNECT to the explicit
  // proxy), "tcp" (anything else: no name to decide on, always denied). Packets the box's
  // network dropped (drop_log.h), always denied: "udp", "icmp", "icmpv6", "ip" (another IP
  // protocol, or a summary of drops not logged one by one), "ether" (not IP); "tcp" too for
  // IPv6 TCP.
  std::string proto;
  std::string host;     // the name decided on ("" when there was none)
  uint16_t port = 0;    // destination port (0 for dns, icmp and the like)
  std::string address;  // upstream address actually connected to, or the original destination
  bool allowed = false;
  std::string reason;                // Decision::reason, or why an allowed connection failed
  uint64_t bytes_up = 0;             // box -> internet
  uint64_t bytes_down = 0;           // internet -> box
  std::vector<std::string> secrets;  // names of secrets injected into this connection
  // The request lines ("POST /v1/messages") that secrets were injected into, the first
  // kMaxLoggedRequests of the connection, each cut at kMaxLoggedRequestLine bytes.
  std::vector<std::string> requests;
  static constexpr size_t kMaxLoggedRequests = 32;
  static constexpr size_t kMaxLoggedRequestLine = 256;
  bool operator==(const LogEntry&) const = default;
};

inline nlohmann::json toJson(const LogEntry& e) {
  return {{"box", e.box},
          {"time_ms", e.time_ms},
          {"proto", e.proto},
          {"host", e.host},
          {"port", e.port},
          {"address", e.address},
          {"decision", e.allowed ? "allow" : "deny"},
          {"reason", e.reason},
          {"bytes_up", e.bytes_up},
          {"bytes_down", e.bytes_down},
          {"secrets", e.secrets},
          {"requests", e.requests}};
}

}  // namespace hutch::egress

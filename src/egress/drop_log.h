// Packets a box's network namespace dropped: the nftables chain on the box's tap device
// (net/box_net.h) drops everything that is neither TCP (for the proxy) nor DNS (UDP 53, for the
// resolver) and logs it to NFLOG group kDropLogGroup; hutchd opens a netlink socket bound to
// that group inside the namespace and hands it to hutch-egress with the box's other sockets.
// This file holds the parts without I/O: the netlink messages parsed into DroppedPackets, their
// log entries, and the limiter that keeps a flood from filling the disk.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "egress/log_entry.h"

namespace hutch::egress {

inline constexpr uint16_t kDropLogGroup = 1;        // per namespace: every box uses the same group
inline constexpr uint32_t kDropLogCopyBytes = 128;  // enough for the IP and transport headers

struct DroppedPacket {
  // "udp", "icmp", "icmpv6", "tcp" (IPv6 TCP: the proxy takes IPv4 only), "ip" (another IP
  // protocol), "ether" (not IP at all).
  std::string proto;
  std::string address;  // destination IP address; "" for "ether"
  uint16_t port = 0;    // destination port for udp/tcp, else 0
  std::string detail;   // "echo-request", "protocol 47", "ethertype 0x88cc", ...
  bool operator==(const DroppedPacket&) const = default;
};

// The packets in one datagram read from an NFLOG netlink socket (one or more
// NFULNL_MSG_PACKET messages, maybe an NLMSG_DONE). Other messages are skipped; a malformed
// message ends the datagram (the packets before it are returned).
std::vector<DroppedPacket> parseNflogDatagram(std::span<const uint8_t> datagram);

// The policy log entry of a dropped packet (box, time and the rest filled by the caller's
// newEntry; this sets proto, address, port, decision and reason).
void describeDrop(const DroppedPacket& packet, LogEntry& entry);

// How many drops get an entry of their own: `burst` at once, then one per `interval_ms`; the
// rest are counted, to be logged as one summary entry (hutch-egress logs it
// ProxyOptions::drop_summary_delay later).
class DropLimiter {
 public:
  explicit DropLimiter(uint32_t burst = 20, int64_t interval_ms = 1000);
  // Whether the drop at `now_ms` gets its own entry; false counts it.
  bool admit(int64_t now_ms);
  // The drops counted since the last call, and the count reset.
  uint64_t takeSuppressed();
  uint64_t suppressed() const { return suppressed_; }
  // The summary entry's reason: "N more dropped packets were not logged one by one ...".
  std::string summaryReason(uint64_t count) const;

 private:
  uint32_t burst_;
  int64_t interval_ms_;
  int64_t capacity_ms_;
  int64_t budget_ms_;  // what is left of the burst, in units of interval_ms per entry
  int64_t last_ms_ = -1;
  uint64_t suppressed_ = 0;
};

}  // namespace hutch::egress

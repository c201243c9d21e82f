// TCP streams (docs/protocol.md, "TCP streams"): the host asks the agent to connect to a port in
// the box and relays bytes over the stream (port forwarding). Needs the "tcp" capability.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "proto/messages.h"

namespace hutch::proto {

// The largest kData payload either side sends.
inline constexpr size_t kMaxDataPayload = size_t{64} * 1024;

// kConnect, host->guest: opens the stream it is sent on.
struct ConnectRequest {
  uint16_t port = 0;                  // 1-65535
  std::string address = "127.0.0.1";  // an IPv4 or IPv6 literal, or "localhost" (127.0.0.1)

  bool operator==(const ConnectRequest&) const = default;
};

// Port 0 and an address that is not an IP literal are kInvalidArgument.
Result<> validate(const ConnectRequest& request);

std::string encodeMessage(const ConnectRequest& message);
template <>
Result<ConnectRequest> decodeMessage<ConnectRequest>(std::string_view payload);

// kPark's answer (kResult): the ids of the TCP streams the agent parked. From then on it sends
// nothing on them, and the host sends nothing on them either, until each is resumed.
struct ParkResult {
  std::vector<uint32_t> streams;

  bool operator==(const ParkResult&) const = default;
};

// kResume, host->guest: the parked stream `stream` goes on as the fresh stream it is sent on.
struct ResumeRequest {
  uint32_t stream = 0;  // nonzero

  bool operator==(const ResumeRequest&) const = default;
};

std::string encodeMessage(const ParkResult& message);
std::string encodeMessage(const ResumeRequest& message);
template <>
Result<ParkResult> decodeMessage<ParkResult>(std::string_view payload);
template <>
Result<ResumeRequest> decodeMessage<ResumeRequest>(std::string_view payload);

}  // namespace hutch::proto

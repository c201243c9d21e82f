// TCP streams (docs/protocol.md, "TCP streams"): the host asks the agent to connect to a port in
// the box and relays bytes over the stream (port forwarding). Needs the "tcp" capability.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

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

}  // namespace hutch::proto

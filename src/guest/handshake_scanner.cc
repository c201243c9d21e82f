#include "guest/handshake_scanner.h"

#include "proto/messages.h"

namespace hutch::guest {
namespace {

uint32_t getU32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) |
         (static_cast<uint32_t>(u[2]) << 16) | (static_cast<uint32_t>(u[3]) << 24);
}

// Could a frame that answers kHello start here? (A complete 12-byte header is available.)
bool plausibleHeader(const char* h) {
  const auto type = static_cast<proto::FrameType>(static_cast<uint8_t>(h[4]));
  return (type == proto::FrameType::kHelloAck || type == proto::FrameType::kError) && h[5] == 0 &&
         h[6] == 0 && h[7] == 0 && getU32(h + 8) == 0 &&
         getU32(h) <= HandshakeScanner::kMaxAnswerPayload;
}

bool acceptable(proto::FrameType type, std::string_view payload) {
  if (type == proto::FrameType::kHelloAck) {
    return proto::decodeMessage<proto::HelloAck>(payload).has_value();
  }
  auto error = proto::decodeMessage<proto::ErrorMessage>(payload);
  return error && error->code == errcName(Errc::kUnsupported);
}

}  // namespace

std::optional<HandshakeScanner::Found> HandshakeScanner::feed(std::span<const char> bytes) {
  buffer_.append(bytes.data(), bytes.size());
  // Offsets before `keep_from` can no longer start the answer.
  size_t keep_from =
      buffer_.size() >= proto::kHeaderSize ? buffer_.size() - proto::kHeaderSize + 1 : 0;
  for (size_t i = 0; i + proto::kHeaderSize <= buffer_.size(); ++i) {
    const char* h = buffer_.data() + i;
    if (!plausibleHeader(h)) continue;
    const uint32_t length = getU32(h);
    if (i + proto::kHeaderSize + length > buffer_.size()) {
      // Maybe the answer, not complete yet; a complete one further on still wins.
      keep_from = std::min(keep_from, i);
      continue;
    }
    const auto type = static_cast<proto::FrameType>(static_cast<uint8_t>(h[4]));
    std::string_view payload(h + proto::kHeaderSize, length);
    if (!acceptable(type, payload)) continue;
    Found found{proto::Frame{type, 0, std::string(payload)},
                buffer_.substr(i + proto::kHeaderSize + length)};
    buffer_.clear();
    return found;
  }
  buffer_.erase(0, keep_from);
  return std::nullopt;
}

}  // namespace hutch::guest

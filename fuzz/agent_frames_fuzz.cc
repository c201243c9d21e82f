// The host's side of the agent channel, fed by a box: the frame decoder (bytes split where the
// first input byte says), every frame's payload decoded by its type, frames re-encoded and
// decoded again (the codec must agree with itself), and the handshake scanner that looks for
// the agent's kHelloAck in whatever a box sent before it.
#include <cstdlib>
#include <span>

#include "agent_payloads.h"
#include "fuzz_input.h"
#include "guest/handshake_scanner.h"

namespace {

using hutch::proto::Frame;
using hutch::proto::FrameDecoder;

// Decodes everything `bytes` holds, fed `chunk` bytes at a time.
void decodeAll(std::string_view bytes, size_t chunk) {
  FrameDecoder decoder;
  size_t offset = 0;
  while (true) {
    auto next = decoder.next();
    if (!next) {
      if (!decoder.failed()) std::abort();  // an error leaves the decoder failed
      if (decoder.next()) std::abort();     // and it stays failed
      return;
    }
    if (!*next) {
      if (offset >= bytes.size()) return;
      std::string_view piece = bytes.substr(offset, chunk);
      decoder.feed(std::span<const char>(piece.data(), piece.size()));
      offset += piece.size();
      continue;
    }
    const Frame& frame = **next;
    hutch::fuzz::decodePayload(frame.type, frame.payload);
    FrameDecoder again;
    std::string encoded = hutch::proto::encodeFrame(frame);
    again.feed(std::span<const char>(encoded.data(), encoded.size()));
    auto decoded = again.next();
    if (!decoded || !*decoded || !(**decoded == frame)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hutch::fuzz::FuzzInput input(data, size);
  size_t chunk = input.byte() % 64 + 1;
  std::string_view bytes = input.rest();
  decodeAll(bytes, bytes.size());
  decodeAll(bytes, chunk);

  hutch::guest::HandshakeScanner scanner;
  for (size_t offset = 0; offset < bytes.size(); offset += chunk) {
    std::string_view piece = bytes.substr(offset, chunk);
    if (auto found = scanner.feed(std::span<const char>(piece.data(), piece.size()))) {
      hutch::fuzz::decodePayload(found->frame.type, found->frame.payload);
      std::string rest = found->rest;
      rest.append(bytes.substr(offset + piece.size()));
      decodeAll(rest, chunk);
      break;
    }
  }
  return 0;
}

// HandshakeScanner: finds the agent's answer to kHello in a byte stream that may begin with
// leftovers of an earlier session.
//
// A host that reconnects quickly can find the guest never noticed it was gone; the agent then
// still holds output of the old session, possibly the tail of a half-written frame, and sends it
// before its kHelloAck. Until the handshake is done the client therefore does not decode the
// stream frame by frame: it looks for the first complete, valid kHelloAck (or a kError
// "unsupported", the refusal of a version) at any byte offset, and starts decoding frames right
// after it. Before the handshake nothing else matters: no stream is open yet.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "proto/frame.h"

namespace hutch::guest {

class HandshakeScanner {
 public:
  // The answer's payload is small; a header claiming more cannot be it.
  static constexpr uint32_t kMaxAnswerPayload = 4096;

  struct Found {
    proto::Frame frame;  // kHelloAck (valid JSON) or kError with code "unsupported"
    std::string rest;    // the bytes after it: frames, aligned
  };

  // Feeds the next bytes; returns the answer once one is complete.
  std::optional<Found> feed(std::span<const char> bytes);

  size_t buffered() const { return buffer_.size(); }

 private:
  std::string buffer_;
};

}  // namespace hutch::guest

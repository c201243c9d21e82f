// Test helper: a blocking connection that speaks raw frames (and raw bytes), for driving the
// agent with exactly the bytes a test wants, including broken ones.
#pragma once

#include <chrono>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"
#include "proto/frame.h"

namespace hutch::agent::testing {

class RawConnection {
 public:
  explicit RawConnection(UniqueFd fd) : fd_(std::move(fd)) {}

  Result<> sendBytes(const std::string& bytes);
  Result<> send(const proto::Frame& frame) { return sendBytes(proto::encodeFrame(frame)); }

  // The next frame; kTimeout if none arrives in time, kUnavailable at end of stream.
  Result<proto::Frame> read(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Sends kHello until a kHelloAck arrives (skipping anything else).
  Result<> handshake();

  int fd() const { return fd_.get(); }
  void close() { fd_.reset(); }

 private:
  UniqueFd fd_;
  proto::FrameDecoder decoder_;
};

}  // namespace hutch::agent::testing

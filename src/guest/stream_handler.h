// StreamHandler: what AgentClient routes one stream's frames to (an exec session, a pending
// request, a TCP connection). Internal to src/guest.
#pragma once

#include "base/error.h"
#include "proto/frame.h"

namespace hutch::guest {

class StreamHandler {
 public:
  virtual ~StreamHandler() = default;

  // A frame the agent sent on this stream.
  virtual void onStreamFrame(const proto::Frame& frame) = 0;
  // The connection closed (kUnavailable, or kCancelled after AgentClient::close()).
  virtual void onStreamClosed(const Error& error) = 0;
  // No more frames will come for the stream: the client forgets it.
  virtual bool streamFinished() const = 0;
};

}  // namespace hutch::guest

// Where the agent's sessions come from: the virtio-serial port in the guest, a unix socket in
// --listen test mode. The server sees only a connected, non-blocking byte stream fd.
#pragma once

#include <functional>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::agent {

class ChannelSource {
 public:
  using ConnectedFn = std::function<void(UniqueFd)>;

  virtual ~ChannelSource() = default;

  // Starts looking for the host; calls on_connected with the fd of each new session, one session
  // at a time. Retries on its own while the host is absent.
  virtual Result<> start(ConnectedFn on_connected) = 0;

  // The session on fd ended (the host went away): take the fd back and wait for the next one.
  virtual void release(UniqueFd fd) = 0;

  virtual std::string describe() const = 0;
};

}  // namespace hutch::agent

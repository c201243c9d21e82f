// UnixListener: --listen mode. Accepts connections on a unix socket one at a time and hands each
// to the server as a session, exactly as if it were the virtio-serial port.
#pragma once

#include <string>

#include "agent/channel/channel_source.h"
#include "agent/event_loop.h"

namespace hutch::agent {

class UnixListener : public ChannelSource {
 public:
  UnixListener(EventLoop& loop, std::string path) : loop_(loop), path_(std::move(path)) {}
  ~UnixListener() override;

  Result<> start(ConnectedFn on_connected) override;
  void release(UniqueFd fd) override;
  std::string describe() const override { return "unix socket " + path_; }

 private:
  Result<> watch();
  void onAcceptable();

  EventLoop& loop_;
  std::string path_;
  UniqueFd listener_;
  ConnectedFn on_connected_;
};

}  // namespace hutch::agent

// VirtioPort: the guest end of the host channel, a virtio-serial port named "hutch.agent".
//
// The port is found by scanning /sys/class/virtio-ports/*/name and opened once
// (/dev/vportNpM, O_RDWR|O_NONBLOCK|O_CLOEXEC). While no host is connected to QEMU's socket the
// port reports POLLHUP and reads return 0, so the port is polled on a short backoff timer
// (never a spin) until the host is there; each (re)connection is a new session.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "agent/channel/channel_source.h"
#include "agent/event_loop.h"

namespace hutch::agent {

class VirtioPort : public ChannelSource {
 public:
  static constexpr std::chrono::milliseconds kFirstRetry{5};
  static constexpr std::chrono::milliseconds kMaxRetry{100};

  VirtioPort(EventLoop& loop, std::string port_name,
             std::string sysfs_dir = "/sys/class/virtio-ports", std::string dev_dir = "/dev")
      : loop_(loop),
        port_name_(std::move(port_name)),
        sysfs_dir_(std::move(sysfs_dir)),
        dev_dir_(std::move(dev_dir)) {}
  ~VirtioPort() override;

  Result<> start(ConnectedFn on_connected) override;
  void release(UniqueFd fd) override;
  std::string describe() const override { return "virtio port " + port_name_; }

  // The /dev path of the port named port_name, if the kernel has it.
  static std::optional<std::string> findDevice(const std::string& sysfs_dir,
                                               const std::string& dev_dir,
                                               const std::string& port_name);

 private:
  void check();
  void retryLater();

  EventLoop& loop_;
  std::string port_name_;
  std::string sysfs_dir_;
  std::string dev_dir_;
  UniqueFd port_;
  ConnectedFn on_connected_;
  std::chrono::milliseconds backoff_ = kFirstRetry;
  std::optional<EventLoop::TimerId> timer_;
  bool reported_missing_ = false;
};

}  // namespace hutch::agent

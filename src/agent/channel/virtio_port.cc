#include "agent/channel/virtio_port.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "agent/log.h"

namespace hutch::agent {

VirtioPort::~VirtioPort() {
  if (timer_) loop_.cancelTimer(*timer_);
}

std::optional<std::string> VirtioPort::findDevice(const std::string& sysfs_dir,
                                                  const std::string& dev_dir,
                                                  const std::string& port_name) {
  DIR* dir = ::opendir(sysfs_dir.c_str());
  if (!dir) return std::nullopt;
  std::optional<std::string> found;
  while (dirent* entry = ::readdir(dir)) {
    const std::string port = entry->d_name;
    if (port == "." || port == "..") continue;
    std::string name_path = sysfs_dir;
    name_path.append("/").append(port).append("/name");
    std::ifstream name_file(name_path);
    std::string name;
    if (!std::getline(name_file, name)) continue;
    if (name == port_name) {
      found = dev_dir;
      found->append("/").append(port);
      break;
    }
  }
  ::closedir(dir);
  return found;
}

Result<> VirtioPort::start(ConnectedFn on_connected) {
  on_connected_ = std::move(on_connected);
  check();
  return ok();
}

void VirtioPort::release(UniqueFd fd) {
  port_ = std::move(fd);
  backoff_ = kFirstRetry;
  retryLater();
}

void VirtioPort::retryLater() {
  timer_ = loop_.addTimer(backoff_, [this] {
    timer_.reset();
    check();
  });
  backoff_ = std::min(backoff_ * 2, kMaxRetry);
}

void VirtioPort::check() {
  if (!port_) {
    auto device = findDevice(sysfs_dir_, dev_dir_, port_name_);
    if (device) port_ = UniqueFd(::open(device->c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    if (!port_) {
      if (!reported_missing_) {
        logWarning("Waiting for virtio port " + port_name_ +
                   (device ? ": cannot open " + *device + ": " + std::strerror(errno)
                           : std::string(": not present yet")));
        reported_missing_ = true;
      }
      retryLater();
      return;
    }
    logInfo("Opened " + *device + " (" + port_name_ + ")");
  }
  pollfd p{port_.get(), POLLIN, 0};
  if (::poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) {
    retryLater();  // no host connected to the port yet
    return;
  }
  backoff_ = kFirstRetry;
  on_connected_(std::move(port_));
}

}  // namespace hutch::agent

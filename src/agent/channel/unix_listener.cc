#include "agent/channel/unix_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/log.h"

namespace hutch::agent {

UnixListener::~UnixListener() {
  if (listener_) {
    loop_.remove(listener_.get());
    ::unlink(path_.c_str());
  }
}

Result<> UnixListener::start(ConnectedFn on_connected) {
  on_connected_ = std::move(on_connected);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.empty() || path_.size() >= sizeof addr.sun_path) {
    return fail(Errc::kInvalidArgument, "Socket path \"" + path_ + "\" is empty or too long");
  }
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);

  listener_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener_) return fail(sysError("Cannot create a unix socket", errno));
  // A stale socket from an earlier run would make bind fail; anything else at the path is kept.
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path_.c_str());
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    listener_.reset();
    return fail(sysError("Cannot bind " + path_, err));
  }
  if (::listen(listener_.get(), 16) != 0) return fail(sysError("Cannot listen on " + path_, errno));
  return watch();
}

Result<> UnixListener::watch() {
  return loop_.add(listener_.get(), EPOLLIN, [this](uint32_t) { onAcceptable(); });
}

void UnixListener::onAcceptable() {
  UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (!conn) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      logWarning(std::string("Cannot accept a connection: ") + std::strerror(errno));
    }
    return;
  }
  // One session at a time: further connections wait in the backlog.
  loop_.remove(listener_.get());
  on_connected_(std::move(conn));
}

void UnixListener::release(UniqueFd fd) {
  fd.reset();
  if (auto watched = watch(); !watched) logError(watched.error().describe());
}

}  // namespace hutch::agent

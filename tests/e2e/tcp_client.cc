#include "tcp_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace hutch::e2e {

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

}  // namespace

uint16_t freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return 0;
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

int connectLocal(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{.tv_sec = 120, .tv_usec = 0};  // a hang fails the test instead of blocking it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  return fd;
}

int listenLocal(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 8) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::optional<std::string> roundTrip(uint16_t port, const std::string& data) {
  int fd = connectLocal(port);
  if (fd < 0) return std::nullopt;
  bool write_ok = true;
  std::thread writer([&] {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        write_ok = false;
        return;
      }
      off += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
  });
  std::string got;
  char buf[65536];
  bool read_ok = true;
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      read_ok = false;
      break;
    }
    if (n == 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  if (!read_ok) ::shutdown(fd, SHUT_RDWR);  // unblock the writer
  writer.join();
  ::close(fd);
  if (!read_ok || !write_ok) return std::nullopt;
  return got;
}

std::optional<std::string> httpGet(uint16_t port, const std::string& path) {
  return roundTrip(port, "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n");
}

std::optional<std::string> waitForHttp(uint16_t port, const std::string& path,
                                       const std::string& needle, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<std::string> last;
  while (std::chrono::steady_clock::now() < deadline) {
    last = httpGet(port, path);
    if (last && last->find(needle) != std::string::npos) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return last;
}

}  // namespace hutch::e2e

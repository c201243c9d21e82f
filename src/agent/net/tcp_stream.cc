#include "agent/net/tcp_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/log.h"
#include "proto/messages.h"

namespace hutch::agent {

using proto::FrameType;

namespace {

Error connectError(const std::string& peer, uint16_t port, int err) {
  if (err == ECONNREFUSED) {
    return Error(Errc::kUnavailable, "Connection refused on " + peer +
                                         " (nothing listens on port " + std::to_string(port) +
                                         " in the box)");
  }
  if (err == ETIMEDOUT) return Error(Errc::kTimeout, "Connecting to " + peer + " timed out");
  return Error(Errc::kUnavailable, "Cannot connect to " + peer + ": " + std::strerror(err), err);
}

}  // namespace

TcpStream::TcpStream(EventLoop& loop, StreamSink& sink, uint32_t id)
    : loop_(loop),
      sink_(sink),
      id_(id),
      send_window_(proto::kInitialWindow),
      receive_credit_(proto::kInitialWindow) {}

TcpStream::~TcpStream() {
  if (connect_timer_) loop_.cancelTimer(*connect_timer_);
  resetSocket();
}

void TcpStream::resetSocket() {
  if (!socket_) return;
  if (events_ != 0) loop_.remove(socket_.get());
  events_ = 0;
  if (!finished_ || !write_shut_ || !socket_eof_) {
    // Not a clean end: the peer sees a reset, not an orderly close it could mistake for success.
    linger hard{1, 0};
    ::setsockopt(socket_.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  }
  socket_.reset();
}

Result<> TcpStream::connect(const proto::ConnectRequest& request) {
  HUTCH_TRY_VOID(proto::validate(request));
  const std::string address = request.address == "localhost" ? "127.0.0.1" : request.address;
  port_ = request.port;
  sockaddr_storage storage{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(request.port);
    length = sizeof *v4;
    peer_ = address + ":" + std::to_string(request.port);
  } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(request.port);
    length = sizeof *v6;
    peer_ = "[" + address + "]:" + std::to_string(request.port);
  } else {
    return fail(Errc::kInvalidArgument, "Address \"" + address + "\" is not an IP address");
  }
  socket_ = UniqueFd(::socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket_) return fail(sysError("Cannot create a socket", errno));
  if (::connect(socket_.get(), reinterpret_cast<sockaddr*>(&storage), length) != 0) {
    if (errno != EINPROGRESS) {
      const int err = errno;
      socket_.reset();
      return fail(connectError(peer_, request.port, err));
    }
    connecting_ = true;
    connect_timer_ = loop_.addTimer(kConnectTimeout, [this] {
      connect_timer_.reset();
      endWithError(Error(Errc::kTimeout, "Connecting to " + peer_ + " timed out after " +
                                             std::to_string(kConnectTimeout.count()) + " s"));
    });
    updateInterest();
    return ok();
  }
  onConnectDone();
  return ok();
}

void TcpStream::onConnectDone() {
  connecting_ = false;
  if (connect_timer_) loop_.cancelTimer(*connect_timer_);
  connect_timer_.reset();
  emit(FrameType::kConnected, "{}");
  // Data the host sent before it saw kConnected (or kEof) is waiting.
  writeSocket();
}

void TcpStream::onEvents(uint32_t events) {
  if (finished_) return;
  if (connecting_) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(socket_.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == 0 && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == EPOLLOUT) {
      return onConnectDone();
    }
    if (err == 0 && (events & EPOLLOUT) == 0) return;  // not yet
    return endWithError(connectError(peer_, port_, err != 0 ? err : ECONNREFUSED));
  }
  if (events & EPOLLOUT) writeSocket();
  if (!finished_ && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) readSocket();
}

void TcpStream::readSocket() {
  if (finished_ || parked_ || socket_eof_ || send_window_ == 0) return updateInterest();
  char buffer[proto::kMaxDataPayload];
  const size_t want = static_cast<size_t>(std::min<uint64_t>(send_window_, sizeof buffer));
  ssize_t n;
  do {
    n = ::read(socket_.get(), buffer, want);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    emit(FrameType::kData, std::string_view(buffer, static_cast<size_t>(n)));
    send_window_ -= static_cast<uint64_t>(n);
  } else if (n == 0) {
    socket_eof_ = true;
    emit(FrameType::kEof, {});
  } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
    return endWithError(Error(Errc::kUnavailable,
                              "The connection to " + peer_ + " failed: " + std::strerror(errno)));
  }
  updateInterest();
  maybeFinish();
}

void TcpStream::writeSocket() {
  if (finished_ || connecting_) return;
  size_t written = 0;
  while (out_offset_ < out_.size()) {
    const ssize_t n =
        ::send(socket_.get(), out_.data() + out_offset_, out_.size() - out_offset_, MSG_NOSIGNAL);
    if (n > 0) {
      out_offset_ += static_cast<size_t>(n);
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return endWithError(Error(
        Errc::kUnavailable,
        "The connection to " + peer_ + " was closed while sending to it: " + std::strerror(errno)));
  }
  if (out_offset_ == out_.size()) {
    out_.clear();
    out_offset_ = 0;
    if (host_eof_ && !write_shut_) {
      ::shutdown(socket_.get(), SHUT_WR);
      write_shut_ = true;
    }
  }
  grant(written);
  updateInterest();
  maybeFinish();
}

void TcpStream::grant(size_t bytes) {
  if (bytes == 0 || finished_) return;
  receive_credit_ += bytes;
  emit(FrameType::kWindow, proto::encodeWindow(static_cast<uint32_t>(bytes)));
}

void TcpStream::updateInterest() {
  if (finished_ || !socket_) return;
  uint32_t want = 0;
  if (connecting_) {
    want = EPOLLOUT;
  } else {
    if (!socket_eof_ && !parked_ && send_window_ > 0) want |= EPOLLIN;
    if (out_offset_ < out_.size()) want |= EPOLLOUT;
  }
  if (want == events_) return;
  // With nothing wanted the socket leaves the loop: epoll reports a hangup even with no events
  // requested, which would spin while the window is used up.
  if (want == 0) {
    loop_.remove(socket_.get());
  } else if (events_ == 0) {
    if (auto added = loop_.add(socket_.get(), want, [this](uint32_t events) { onEvents(events); });
        !added) {
      return endWithError(added.error());
    }
  } else if (auto modified = loop_.modify(socket_.get(), want); !modified) {
    return endWithError(modified.error());
  }
  events_ = want;
}

void TcpStream::onData(std::string_view data) {
  if (finished_) return;
  if (host_eof_) return endWithError(Error(Errc::kProtocol, "Data after kEof"));
  if (data.size() > receive_credit_) {
    return endWithError(Error(Errc::kProtocol, "Data exceeds the stream's window"));
  }
  receive_credit_ -= data.size();
  out_.append(data);
  writeSocket();
}

void TcpStream::onEof() {
  if (finished_ || host_eof_) return;
  host_eof_ = true;
  writeSocket();  // shuts the socket's write side once everything before is written
}

void TcpStream::onWindow(std::string_view payload) {
  if (finished_) return;
  auto increment = proto::decodeWindow(payload);
  if (!increment) return endWithError(Error(Errc::kProtocol, increment.error().message()));
  send_window_ += *increment;
  updateInterest();
}

void TcpStream::onClose() {
  if (finished_) return;
  emit(FrameType::kClose, "{}");
  finish();
}

void TcpStream::maybeFinish() {
  if (finished_ || !write_shut_ || !socket_eof_) return;
  emit(FrameType::kClose, "{}");
  finish();
}

void TcpStream::endWithError(const Error& error) {
  if (finished_) return;
  emit(FrameType::kError, proto::encodeMessage(proto::ErrorMessage::fromError(error)));
  finish();
}

void TcpStream::finish() {
  finished_ = true;
  if (connect_timer_) loop_.cancelTimer(*connect_timer_);
  connect_timer_.reset();
  resetSocket();
  out_.clear();
  out_offset_ = 0;
  if (!parked_) sink_.streamFinished(id_);  // else when it is resumed
}

void TcpStream::emit(FrameType type, std::string_view payload) {
  if (parked_) {
    held_.emplace_back(type, std::string(payload));
    return;
  }
  sink_.sendFrame(type, id_, payload);
}

void TcpStream::park() {
  parked_ = true;
  updateInterest();  // no more reading: the peer in the box waits on TCP's window
}

void TcpStream::resume(uint32_t new_id) {
  id_ = new_id;
  parked_ = false;
  auto held = std::move(held_);
  held_.clear();
  for (const auto& [type, payload] : held) sink_.sendFrame(type, id_, payload);
  if (finished_) {
    sink_.streamFinished(id_);
    return;
  }
  updateInterest();
  maybeFinish();
}

}  // namespace hutch::agent

// "direct-tcpip" channels: a TCP connection to a port inside the box through the agent's TCP
// relay (guest/tcp_stream.h), as published ports use it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "ssh/ssh_connection.h"

namespace hutch::ssh {

namespace {

TcpChannel* self(void* userdata) {
  return static_cast<TcpChannel*>(userdata);
}

}  // namespace

TcpChannel::TcpChannel(std::shared_ptr<Connection> connection, std::string address, uint16_t port)
    : Channel(std::move(connection)), address_(std::move(address)), port_(port) {}

void TcpChannel::install() {
  ssh_callbacks_init(&callbacks_);
  callbacks_.userdata = this;
  callbacks_.channel_data_function = &TcpChannel::onData;
  callbacks_.channel_eof_function = &TcpChannel::onEof;
  callbacks_.channel_close_function = &TcpChannel::onClose;
  ssh_set_channel_callbacks(channel_, &callbacks_);
  auto me = std::static_pointer_cast<TcpChannel>(shared_from_this());
  asio::co_spawn(connection_->executor(), me->run(), asio::detached);
}

void TcpChannel::abort() {
  if (stream_) stream_->close();
  changed_.notify();
}

int TcpChannel::onData(ssh_session /*s*/, ssh_channel /*c*/, void* data, uint32_t len,
                       int is_stderr, void* userdata) {
  if (is_stderr != 0) return static_cast<int>(len);
  return static_cast<int>(self(userdata)->acceptData(static_cast<const char*>(data), len));
}

void TcpChannel::onEof(ssh_session /*s*/, ssh_channel /*c*/, void* userdata) {
  self(userdata)->peer_eof_ = true;
  self(userdata)->changed_.notify();
}

void TcpChannel::onClose(ssh_session /*s*/, ssh_channel /*c*/, void* userdata) {
  TcpChannel* channel = self(userdata);
  channel->peer_closed_ = true;
  channel->peer_eof_ = true;
  if (channel->stream_) channel->stream_->close();
  channel->changed_.notify();
}

asio::awaitable<void> TcpChannel::run() {
  auto keep = shared_from_this();
  auto agent = co_await connection_->agent();
  // (No co_await inside ?: — GCC 12 miscompiles it.)
  Result<std::shared_ptr<guest::TcpStream>> stream = fail(Errc::kInternal, "not connected");
  if (agent) {
    stream = co_await (*agent)->connect(port_, address_);
  } else {
    stream = fail(agent.error());
  }
  if (!stream) {
    spdlog::info("ssh: box={} direct-tcpip to {}:{}: {}", connection_->client().box, address_,
                 port_, stream.error().describe());
    sendEofAndClose();
    connection_->drop(this);
    co_return;
  }
  stream_ = *stream;
  if (gone()) {
    stream_->close();
    connection_->drop(this);
    co_return;
  }
  asio::co_spawn(connection_->executor(), toBox(stream_), asio::detached);
  // Box -> client: each read grants the agent more window, so a slow client slows the peer.
  while (true) {
    auto data = co_await stream_->read();
    if (!data || data->empty()) break;
    if (!co_await writeAll(*data)) {
      stream_->close();
      break;
    }
  }
  if (!gone()) ssh_channel_send_eof(channel_);
  connection_->poke();
  // The other direction ends on its own (the client's EOF); the channel closes once both have.
  co_await stream_->done();
  sendEofAndClose();
  connection_->drop(this);
}

asio::awaitable<void> TcpChannel::toBox(std::shared_ptr<guest::TcpStream> stream) {
  auto keep = shared_from_this();
  while (true) {
    auto chunk = co_await nextData();
    if (!chunk) break;
    if (!co_await stream->write(*chunk)) co_return;
  }
  if (peer_closed_) {
    stream->close();
  } else {
    (void)stream->shutdownWrite();
  }
}

}  // namespace hutch::ssh

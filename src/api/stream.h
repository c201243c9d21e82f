// AnyStream: one byte stream type for every listener the API serves — the unix socket, plain TCP
// on loopback, and TLS over TCP — so that the HTTP server, the upgraded exec relay and the
// WebSocket code are written once. It models Asio's AsyncReadStream and AsyncWriteStream (Beast's
// http::async_read and websocket::stream<AnyStream&> take it) by forwarding to the stream it
// holds; every alternative returns the same type for a given completion token.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/role.hpp>
#include <memory>
#include <string>
#include <variant>

namespace hutch::api {

namespace asio = boost::asio;

class AnyStream {
 public:
  using UnixSocket = asio::local::stream_protocol::socket;
  using TcpSocket = asio::ip::tcp::socket;
  using TlsStream = asio::ssl::stream<TcpSocket>;
  using executor_type = asio::any_io_executor;

 private:
  // The stream itself (deref) and its socket (layer), for each alternative; before their use.
  template <class S>
  static S& deref(S& s) {
    return s;
  }
  static TlsStream& deref(std::unique_ptr<TlsStream>& s) { return *s; }
  template <class S>
  static S& layer(S& s) {
    return s;
  }
  static TcpSocket& layer(std::unique_ptr<TlsStream>& s) { return s->next_layer(); }

 public:
  explicit AnyStream(UnixSocket socket) : stream_(std::move(socket)) {}
  explicit AnyStream(TcpSocket socket) : stream_(std::move(socket)) {}
  explicit AnyStream(std::unique_ptr<TlsStream> tls) : stream_(std::move(tls)) {}
  AnyStream(AnyStream&&) = default;
  AnyStream& operator=(AnyStream&&) = default;

  executor_type get_executor() {
    return std::visit([](auto& s) -> executor_type { return layer(s).get_executor(); }, stream_);
  }

  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    return std::visit(
        [&](auto& s) { return deref(s).async_read_some(buffers, std::forward<Token>(token)); },
        stream_);
  }

  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return std::visit(
        [&](auto& s) { return deref(s).async_write_some(buffers, std::forward<Token>(token)); },
        stream_);
  }

  // Ends the connection now (no TLS close_notify): pending reads and writes complete with an
  // error. Safe to call more than once.
  void close();
  // Shuts the sending side (TCP FIN; TLS close_notify is not waited for).
  void shutdownSend();
  bool isOpen() const;
  bool isTls() const { return std::holds_alternative<std::unique_ptr<TlsStream>>(stream_); }
  bool isUnix() const { return std::holds_alternative<UnixSocket>(stream_); }
  // The client's address ("127.0.0.1", "::1"), or "unix" for the unix socket.
  std::string peerAddress() const;

 private:
  std::variant<UnixSocket, TcpSocket, std::unique_ptr<TlsStream>> stream_;
};

// Beast closes the stream beneath a WebSocket this way when it gives up on it.
inline void beast_close_socket(AnyStream& stream) {
  stream.close();
}

// Beast's WebSocket closing handshake ends with a teardown of the stream beneath it.
void teardown(boost::beast::role_type role, AnyStream& stream, boost::system::error_code& ec);

template <class TeardownHandler>
void async_teardown(boost::beast::role_type /*role*/, AnyStream& stream,
                    TeardownHandler&& handler) {
  stream.shutdownSend();
  asio::post(stream.get_executor(), [h = std::forward<TeardownHandler>(handler)]() mutable {
    h(boost::system::error_code{});
  });
}

}  // namespace hutch::api

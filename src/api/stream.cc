#include "api/stream.h"

namespace hutch::api {

void AnyStream::close() {
  std::visit(
      [](auto& s) {
        boost::system::error_code ec;
        auto& socket = layer(s);
        socket.shutdown(asio::socket_base::shutdown_both, ec);
        socket.close(ec);
      },
      stream_);
}

void AnyStream::shutdownSend() {
  std::visit(
      [](auto& s) {
        boost::system::error_code ec;
        layer(s).shutdown(asio::socket_base::shutdown_send, ec);
      },
      stream_);
}

bool AnyStream::isOpen() const {
  return std::visit(
      [](const auto& s) {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, std::unique_ptr<TlsStream>>) {
          return s->next_layer().is_open();
        } else {
          return s.is_open();
        }
      },
      stream_);
}

std::string AnyStream::peerAddress() const {
  boost::system::error_code ec;
  if (const auto* tcp = std::get_if<TcpSocket>(&stream_)) {
    auto endpoint = tcp->remote_endpoint(ec);
    return ec ? std::string("?") : endpoint.address().to_string();
  }
  if (const auto* tls = std::get_if<std::unique_ptr<TlsStream>>(&stream_)) {
    auto endpoint = (*tls)->next_layer().remote_endpoint(ec);
    return ec ? std::string("?") : endpoint.address().to_string();
  }
  return "unix";
}

void teardown(boost::beast::role_type /*role*/, AnyStream& stream, boost::system::error_code& ec) {
  stream.shutdownSend();
  ec = {};
}

}  // namespace hutch::api

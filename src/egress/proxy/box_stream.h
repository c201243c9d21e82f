// The box's side of a connection: a TCP stream (with Beast's timeouts) that can be given back
// bytes already read from it, so that a ClientHello or request line read to decide on can still
// be handed whole to the TLS engine, the HTTP parser or the upstream.
#pragma once

#include <span>
#include <string>

#include "egress/proxy/asio.h"

namespace hutch::egress::proxy {

template <class Next>
class PrefixedStream {
 public:
  using executor_type = typename Next::executor_type;
  using next_layer_type = Next;
  using lowest_layer_type = tcp::socket;  // asio::ssl::stream wants it

  template <class... Args>
  explicit PrefixedStream(Args&&... args) : next_(std::forward<Args>(args)...) {}

  executor_type get_executor() noexcept { return next_.get_executor(); }
  Next& next_layer() noexcept { return next_; }
  lowest_layer_type& lowest_layer() noexcept { return next_.socket(); }

  // Bytes that the next reads return before anything new from the socket.
  void unread(std::span<const char> bytes) { prefix_.insert(0, bytes.data(), bytes.size()); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(error_code, size_t)>(
        [this](auto handler, const MutableBuffers& b) {
          if (prefix_.empty()) {
            next_.async_read_some(b, std::move(handler));
            return;
          }
          size_t n = asio::buffer_copy(b, asio::buffer(prefix_));
          prefix_.erase(0, n);
          asio::post(next_.get_executor(),
                     beast::bind_front_handler(std::move(handler), error_code(), n));
        },
        token, buffers);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return next_.async_write_some(buffers, std::forward<Token>(token));
  }

 private:
  Next next_;
  std::string prefix_;
};

using BoxStream = PrefixedStream<beast::tcp_stream>;

}  // namespace hutch::egress::proxy

// Moving bytes between the box and an upstream: simple proxy answers, one HTTP message relayed
// with its body streamed (Beast's buffer_body relay), and a two-way byte tunnel.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <limits>
#include <string>

#include "egress/proxy/asio.h"

namespace hutch::egress::proxy {

inline constexpr size_t kHeaderLimit = 64 * 1024;

// Writes a short text/plain answer from the proxy itself (Connection: close).
template <class Stream>
asio::awaitable<error_code> writeProxyAnswer(Stream& stream, http::status status, std::string text,
                                             unsigned version = 11) {
  http::response<http::string_body> res{status, version};
  res.set(http::field::server, "hutch-egress");
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.keep_alive(false);
  res.body() = std::move(text) + "\n";
  res.prepare_payload();
  error_code ec;
  co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
  co_return ec;
}

// Relays a message whose header `p` has read from `in` (and which the caller may have edited)
// to `out`: the header, then the body as it arrives, re-framed by the serializer (chunked stays
// chunked, Content-Length stays). Adds the bytes written to `bytes`.
template <bool isRequest, class In, class Out>
asio::awaitable<error_code> relayMessage(In& in, beast::flat_buffer& buffer,
                                         http::parser<isRequest, http::buffer_body>& p, Out& out,
                                         uint64_t& bytes) {
  http::serializer<isRequest, http::buffer_body> sr{p.get()};
  std::array<char, 16384> chunk;
  error_code ec;
  do {
    if (!p.is_done()) {
      p.get().body().data = chunk.data();
      p.get().body().size = chunk.size();
      co_await http::async_read(in, buffer, p, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) co_return ec;
      p.get().body().size = chunk.size() - p.get().body().size;
      p.get().body().data = chunk.data();
      p.get().body().more = !p.is_done();
    } else {
      p.get().body().data = nullptr;
      p.get().body().size = 0;
      p.get().body().more = false;  // else the serializer holds the header back for a body
    }
    size_t n = co_await http::async_write(out, sr, asio::redirect_error(asio::use_awaitable, ec));
    bytes += n;
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return ec;
  } while (!p.is_done() && !sr.is_done());
  co_return ec;
}

// What to do when one direction of a tunnel ends: eof = the reader saw a clean end of stream.
using TunnelEnd = std::function<void(bool from_box, bool eof)>;

namespace detail {

template <class From, class To>
asio::awaitable<void> pump(From& from, To& to, uint64_t& bytes, bool from_box, const TunnelEnd& end,
                           int& running, asio::steady_timer& done) {
  std::array<char, 16384> buf;
  error_code ec;
  for (;;) {
    size_t n = co_await from.async_read_some(asio::buffer(buf),
                                             asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    co_await asio::async_write(to, asio::buffer(buf.data(), n),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    bytes += n;
  }
  end(from_box, ec == asio::error::eof);
  if (--running == 0) done.cancel();
}

}  // namespace detail

// Copies bytes both ways until both directions have ended; `end` half-closes or closes.
template <class Box, class Up>
asio::awaitable<void> tunnel(Box& box, Up& up, uint64_t& bytes_up, uint64_t& bytes_down,
                             TunnelEnd end) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer done(ex, asio::steady_timer::time_point::max());
  int running = 2;
  asio::co_spawn(ex, detail::pump(box, up, bytes_up, true, end, running, done),
                 [](const std::exception_ptr&) {});
  co_await detail::pump(up, box, bytes_down, false, end, running, done);
  // Both pumps decrement `running` (by reference) as they end.
  while (running > 0) {  // NOLINT(bugprone-infinite-loop)
    error_code ec;
    co_await done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

// Answers a request relayed to `up`: reads the response(s) and relays them to `box`; 1xx
// interim answers are passed on, a 101 turns the link into a tunnel (ended by `end`). `edit`
// may change each response header before it goes to the box.
enum class ResponseOutcome {
  kKeepAlive,   // the link may carry another request
  kClose,       // done; close both sides
  kNoResponse,  // the upstream failed before any response byte reached the box
};
template <class Up, class Box, class Edit>
asio::awaitable<ResponseOutcome> relayResponses(Up& up, beast::flat_buffer& up_buffer, Box& box,
                                                beast::flat_buffer& box_buffer, bool head,
                                                bool request_keep_alive, uint64_t& bytes_up,
                                                uint64_t& bytes_down, const Edit& edit,
                                                TunnelEnd end,
                                                std::chrono::milliseconds header_timeout) {
  bool wrote = false;
  for (;;) {
    http::response_parser<http::buffer_body> p;
    p.header_limit(kHeaderLimit);
    p.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (head) p.skip(true);
    error_code ec;
    beast::get_lowest_layer(up).expires_after(header_timeout);
    co_await http::async_read_header(up, up_buffer, p,
                                     asio::redirect_error(asio::use_awaitable, ec));
    beast::get_lowest_layer(up).expires_never();
    if (ec) co_return wrote ? ResponseOutcome::kClose : ResponseOutcome::kNoResponse;
    edit(p.get());
    unsigned status = p.get().result_int();
    wrote = true;
    ec = co_await relayMessage(up, up_buffer, p, box, bytes_down);
    if (ec) co_return ResponseOutcome::kClose;
    if (status == 101) {
      // Upgraded (WebSocket...): whatever either side sent early goes first, then raw bytes.
      if (box_buffer.size() > 0) {
        size_t n = co_await asio::async_write(up, box_buffer.data(),
                                              asio::redirect_error(asio::use_awaitable, ec));
        bytes_up += n;
        box_buffer.consume(box_buffer.size());
      }
      if (!ec && up_buffer.size() > 0) {
        size_t n = co_await asio::async_write(box, up_buffer.data(),
                                              asio::redirect_error(asio::use_awaitable, ec));
        bytes_down += n;
        up_buffer.consume(up_buffer.size());
      }
      if (!ec) co_await tunnel(box, up, bytes_up, bytes_down, end);
      co_return ResponseOutcome::kClose;
    }
    if (status >= 100 && status < 200) continue;  // interim; the real answer follows
    bool keep = request_keep_alive && p.get().keep_alive() && !p.need_eof();
    co_return keep ? ResponseOutcome::kKeepAlive : ResponseOutcome::kClose;
  }
}

}  // namespace hutch::egress::proxy

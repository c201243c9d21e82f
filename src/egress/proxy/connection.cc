#include "egress/proxy/connection.h"

#include <span>
#include <vector>

#include "egress/proxy/client_hello.h"
#include "egress/proxy/http_relay.h"

namespace hutch::egress::proxy {

namespace {

constexpr size_t kMaxFirstBytes = kMaxClientHelloBytes + 4096;

}  // namespace

std::string deniedText(const std::string& host, uint16_t port, const std::string& reason) {
  return "hutch: " + (host.empty() ? std::string("this destination") : host) + ":" +
         std::to_string(port) + " is blocked by this box's egress policy (" + reason +
         "). Ask for it to be added to the box's allow list (hutch policy set).";
}

asio::awaitable<FirstBytes> readFirstBytes(BoxStream& box, std::chrono::milliseconds timeout) {
  std::vector<char> head;
  std::array<char, 4096> chunk;
  FirstBytes out;
  box.next_layer().expires_after(timeout);
  for (;;) {
    if (!head.empty()) {
      std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(head.data()), head.size());
      bool decided = true;
      if (head[0] == 0x16) {
        HelloResult hello = inspectClientHello(bytes);
        switch (hello.status) {
          case HelloStatus::kFound:
            out.kind = FirstBytes::kTls;
            out.sni = canonicalName(hello.sni);
            break;
          case HelloStatus::kNoSni: out.why = "TLS without a server name (SNI)"; break;
          case HelloStatus::kNotTls:
          case HelloStatus::kMalformed: out.why = "a malformed TLS ClientHello"; break;
          case HelloStatus::kNeedMore: decided = false; break;
        }
      } else {
        switch (looksLikeHttpRequest(bytes)) {
          case HttpStart::kYes: out.kind = FirstBytes::kHttp; break;
          case HttpStart::kNo: out.why = "neither TLS nor HTTP"; break;
          case HttpStart::kNeedMore: decided = false; break;
        }
      }
      if (decided) break;
      if (head.size() >= kMaxFirstBytes) {
        out.why = "too many bytes without a complete ClientHello";
        break;
      }
    }
    error_code ec;
    size_t n = co_await box.async_read_some(asio::buffer(chunk),
                                            asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      out.kind = FirstBytes::kOther;
      out.why = ec == beast::error::timeout
                    ? "nothing recognisable within " + std::to_string(timeout.count()) + " ms"
                    : "closed before sending a recognisable request";
      break;
    }
    head.insert(head.end(), chunk.data(), chunk.data() + n);
  }
  box.next_layer().expires_never();
  box.unread(head);
  co_return out;
}

asio::awaitable<void> tunnelTo(std::shared_ptr<Cell> cell, BoxStream& box, LiveSockets& live,
                               LogEntry entry, std::string host, uint16_t port,
                               bool connect_reply) {
  const ProxyOptions& options = cell->options();
  auto up = co_await connectUpstream(options.resolver, options.filter, host, port,
                                     options.connect_timeout, cell->policy().allow_private);
  if (!up) {
    bool refused = up.error().code() == Errc::kFailedPrecondition;
    if (refused) entry.allowed = false;
    entry.reason = up.error().message();
    cell->log(entry);
    if (connect_reply) {
      co_await writeProxyAnswer(box, refused ? http::status::forbidden : http::status::bad_gateway,
                                "hutch: " + up.error().message());
    }
    co_return;
  }
  entry.address = up->endpoint.address().to_string();
  live.upstream = &up->stream.socket();
  error_code ec;
  if (connect_reply) {
    static constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";
    co_await asio::async_write(box, asio::buffer(kEstablished),
                               asio::redirect_error(asio::use_awaitable, ec));
  }
  if (!ec && !cell->closed()) {
    box.next_layer().expires_never();
    beast::tcp_stream& upstream = up->stream;
    TunnelEnd end = [&box, &upstream](bool from_box, bool eof) {
      error_code ignored;
      tcp::socket& to = from_box ? upstream.socket() : box.next_layer().socket();
      if (eof) {
        to.shutdown(tcp::socket::shutdown_send, ignored);
      } else {
        upstream.socket().close(ignored);
        box.next_layer().socket().close(ignored);
      }
    };
    co_await tunnel(box, upstream, entry.bytes_up, entry.bytes_down, end);
  }
  live.upstream = nullptr;
  cell->log(entry);
}

}  // namespace hutch::egress::proxy

// The explicit proxy (HTTP_PROXY=http://10.0.2.2:3128): CONNECT host:port, and plain HTTP with
// absolute-URI requests.
#include <limits>

#include "egress/proxy/connection.h"
#include "egress/proxy/http_relay.h"
#include "egress/proxy/request_target.h"

namespace hutch::egress::proxy {

namespace {

bool anyBinds(const std::vector<Secret>& secrets, std::string_view host) {
  for (const Secret& s : secrets) {
    if (bindsHost(s, host)) return true;
  }
  return false;
}

asio::awaitable<void> serveConnect(std::shared_ptr<Cell> cell, BoxStream& box,
                                   beast::flat_buffer& buffer, LiveSockets& live,
                                   std::string target) {
  auto authority = parseAuthority(target);
  if (!authority) {
    co_await writeProxyAnswer(box, http::status::bad_request,
                              "hutch: CONNECT needs host:port, got '" + target + "'");
    co_return;
  }
  LogEntry entry = cell->newEntry("connect", authority->host, authority->port);
  Decision decision = cell->decide(authority->host, authority->port);
  entry.allowed = decision.allowed;
  entry.reason = decision.reason;
  if (!decision.allowed) {
    cell->log(entry);
    co_await writeProxyAnswer(box, http::status::forbidden,
                              deniedText(authority->host, authority->port, decision.reason));
    co_return;
  }
  // Bytes the box sent after the CONNECT request belong to the tunnel.
  if (buffer.size() > 0) {
    auto data = buffer.data();
    box.unread(std::span<const char>(static_cast<const char*>(data.data()), data.size()));
    buffer.consume(buffer.size());
  }
  auto secrets = cell->secrets();
  if (!anyBinds(*secrets, authority->host)) {
    co_await tunnelTo(cell, box, live, std::move(entry), authority->host, authority->port, true);
    co_return;
  }
  // A host with secrets: answer first, then see whether the box speaks TLS to it.
  static constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";
  error_code ec;
  co_await asio::async_write(box, asio::buffer(kEstablished),
                             asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return;
  FirstBytes first = co_await readFirstBytes(box, cell->options().first_bytes_timeout);
  if (first.kind == FirstBytes::kTls) {
    if (first.sni != authority->host) {  // both canonical: compared without case
      entry.allowed = false;
      entry.reason = "TLS server name " + first.sni + " does not match the CONNECT host";
      cell->log(entry);
      co_return;
    }
    co_await intercept(cell, box, live, std::move(entry), authority->host, authority->port);
    co_return;
  }
  // Not TLS: no secrets go into it; a plain tunnel.
  co_await tunnelTo(cell, box, live, std::move(entry), authority->host, authority->port, false);
}

}  // namespace

asio::awaitable<void> serveExplicit(std::shared_ptr<Cell> cell, tcp::socket socket) {
  BoxStream box(std::move(socket));
  LiveSockets live;
  live.box = &box.next_layer().socket();
  LiveGuard guard(*cell, &live);
  beast::flat_buffer buffer;
  auto parser = std::make_unique<http::request_parser<http::buffer_body>>();
  parser->header_limit(kHeaderLimit);
  parser->body_limit(std::numeric_limits<std::uint64_t>::max());
  box.next_layer().expires_after(cell->options().first_bytes_timeout);
  error_code ec;
  co_await http::async_read_header(box, buffer, *parser,
                                   asio::redirect_error(asio::use_awaitable, ec));
  box.next_layer().expires_never();
  if (ec) {
    if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
        ec != asio::error::operation_aborted) {
      co_await writeProxyAnswer(box, http::status::bad_request,
                                "hutch: this is the box's HTTP proxy; it could not read the "
                                "request (" +
                                    ec.message() + ")");
    }
    co_return;
  }
  if (parser->get().method() == http::verb::connect) {
    std::string target(parser->get().target());
    co_await serveConnect(cell, box, buffer, live, std::move(target));
    co_return;
  }
  PlainHttpMode mode;
  mode.explicit_proxy = true;
  mode.first = std::move(parser);
  co_await forwardPlainHttp(cell, box, buffer, live, std::move(mode));
}

}  // namespace hutch::egress::proxy

// Plain HTTP from the box (absolute-URI requests to the explicit proxy, or requests on a
// transparently redirected connection): decided per request, forwarded without secrets. In
// explicit mode the URI's host decides and the Host header sent upstream is set to the URI's
// authority; in transparent mode the Host header decides.
#include <limits>
#include <optional>
#include <variant>

#include "egress/proxy/client_hello.h"
#include "egress/proxy/connection.h"
#include "egress/proxy/http_relay.h"
#include "egress/proxy/request_target.h"

namespace hutch::egress::proxy {

asio::awaitable<void> forwardPlainHttp(std::shared_ptr<Cell> cell, BoxStream& box,
                                       beast::flat_buffer& buffer, LiveSockets& live,
                                       PlainHttpMode mode) {
  const ProxyOptions& options = cell->options();
  std::optional<Upstream> up;
  beast::flat_buffer up_buffer;
  std::string up_host;
  uint16_t up_port = 0;
  std::optional<LogEntry> entry;  // of the current upstream connection
  bool first_request = true;
  error_code ec;
  for (;;) {
    std::unique_ptr<http::request_parser<http::buffer_body>> p = std::move(mode.first);
    if (!p) {
      p = std::make_unique<http::request_parser<http::buffer_body>>();
      p->header_limit(kHeaderLimit);
      p->body_limit(std::numeric_limits<std::uint64_t>::max());
      box.next_layer().expires_after(first_request ? options.first_bytes_timeout
                                                   : options.idle_timeout);
      co_await http::async_read_header(box, buffer, *p,
                                       asio::redirect_error(asio::use_awaitable, ec));
      box.next_layer().expires_never();
      if (ec) break;
    }
    first_request = false;
    auto& req = p->get();
    std::string host;
    uint16_t port = 0;
    if (mode.explicit_proxy) {
      auto parsed = parseAbsoluteUri(std::string_view(req.target().data(), req.target().size()));
      if (auto* why = std::get_if<std::string>(&parsed)) {
        co_await writeProxyAnswer(box, http::status::bad_request, "hutch: " + *why);
        break;
      }
      auto& uri = std::get<AbsoluteUri>(parsed);
      host = uri.host;
      port = uri.port;
      req.target(uri.path);
      req.erase(http::field::proxy_connection);
      req.erase(http::field::proxy_authorization);
      // The URI decided, so the URI's authority is what goes upstream: a Host header naming
      // anything else is replaced (RFC 9112 3.2.2: a proxy ignores it for an absolute URI).
      req.set(http::field::host, uri.authority);
    } else {
      auto it = req.find(http::field::host);
      port = mode.original_port;
      if (it == req.end() || it->value().empty()) {
        LogEntry denied = cell->newEntry("tcp", "", port);
        denied.address = mode.original_address;
        denied.reason = "no name to decide on: an HTTP request without a Host header";
        cell->log(denied);
        break;
      }
      host = normaliseHost(std::string_view(it->value().data(), it->value().size()));
    }
    Decision decision =
        isValidHostName(host) ? cell->decide(host, port) : Decision{false, "not a host name"};
    if (!decision.allowed) {
      LogEntry denied = cell->newEntry("http", host, port);
      denied.address = mode.original_address;
      denied.reason = decision.reason;
      cell->log(denied);
      co_await writeProxyAnswer(box, http::status::forbidden,
                                deniedText(host, port, decision.reason), req.version());
      break;
    }
    if (!up || host != up_host || port != up_port) {
      if (entry) cell->log(*entry);
      live.upstream = nullptr;
      up.reset();
      up_buffer.clear();
      entry = cell->newEntry("http", host, port);
      entry->allowed = true;
      entry->reason = decision.reason;
      auto connected =
          co_await connectUpstream(options.resolver, options.filter, host, port,
                                   options.connect_timeout, cell->policy().allow_private);
      if (!connected) {
        bool refused = connected.error().code() == Errc::kFailedPrecondition;
        if (refused) entry->allowed = false;
        entry->reason = connected.error().message();
        co_await writeProxyAnswer(box,
                                  refused ? http::status::forbidden : http::status::bad_gateway,
                                  "hutch: " + connected.error().message(), req.version());
        break;
      }
      up.emplace(std::move(*connected));
      up_host = host;
      up_port = port;
      entry->address = up->endpoint.address().to_string();
      live.upstream = &up->stream.socket();
    }
    if (req[http::field::expect] == "100-continue") {
      // Answer it here: the body is read from the box before the upstream's answer is.
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      co_await asio::async_write(box, asio::buffer(kContinue),
                                 asio::redirect_error(asio::use_awaitable, ec));
      req.erase(http::field::expect);
    }
    bool head = req.method() == http::verb::head;
    bool keep_alive = req.keep_alive();
    ec = co_await relayMessage(box, buffer, *p, up->stream, entry->bytes_up);
    if (ec) break;
    beast::tcp_stream& upstream = up->stream;
    TunnelEnd end = [&box, &upstream](bool, bool) {
      error_code ignored;
      upstream.socket().close(ignored);
      box.next_layer().socket().close(ignored);
    };
    auto no_edit = [](http::response_header<>&) {};
    ResponseOutcome outcome =
        co_await relayResponses(upstream, up_buffer, box, buffer, head, keep_alive, entry->bytes_up,
                                entry->bytes_down, no_edit, end, options.response_timeout);
    if (outcome == ResponseOutcome::kNoResponse) {
      entry->reason = "the upstream closed without answering";
      co_await writeProxyAnswer(box, http::status::bad_gateway,
                                "hutch: " + host + " closed the connection without answering");
      break;
    }
    if (outcome == ResponseOutcome::kClose) break;
  }
  if (entry) cell->log(*entry);
  live.upstream = nullptr;
}

}  // namespace hutch::egress::proxy

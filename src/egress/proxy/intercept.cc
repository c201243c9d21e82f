// TLS interception for hosts bound by secrets: the box talks TLS to us with a leaf minted for
// the name; each request is checked, given the real credentials and sent on over verified TLS.
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <limits>

#include "egress/proxy/connection.h"
#include "egress/proxy/http_relay.h"

namespace hutch::egress::proxy {

namespace {

using UpstreamTls = ssl::stream<beast::tcp_stream>;

struct TlsUpstream {
  std::unique_ptr<UpstreamTls> stream;
  std::string address;
};

asio::awaitable<Result<TlsUpstream>> connectTls(std::shared_ptr<Cell> cell, std::string host,
                                                uint16_t port) {
  const ProxyOptions& options = cell->options();
  HUTCH_CO_TRY(Upstream raw,
               co_await connectUpstream(options.resolver, options.filter, host, port,
                                        options.connect_timeout, cell->policy().allow_private));
  TlsUpstream out;
  out.address = raw.endpoint.address().to_string();
  out.stream = std::make_unique<UpstreamTls>(std::move(raw.stream), *cell->env().upstream_tls);
  SSL* ssl = out.stream->native_handle();
  if (SSL_set_tlsext_host_name(ssl, host.c_str()) != 1 || SSL_set1_host(ssl, host.c_str()) != 1) {
    co_return fail(Errc::kInternal, "Cannot set the TLS server name " + host);
  }
  out.stream->set_verify_mode(ssl::verify_peer);
  out.stream->next_layer().expires_after(options.connect_timeout);
  error_code ec;
  co_await out.stream->async_handshake(ssl::stream_base::client,
                                       asio::redirect_error(asio::use_awaitable, ec));
  out.stream->next_layer().expires_never();
  if (ec) {
    long verify = SSL_get_verify_result(ssl);
    std::string why = verify != X509_V_OK ? std::string("certificate not trusted: ") +
                                                X509_verify_cert_error_string(verify)
                                          : ec.message();
    co_return fail(Errc::kUnavailable, "TLS with " + host + " failed (" + why + ")");
  }
  co_return out;
}

}  // namespace

asio::awaitable<void> intercept(std::shared_ptr<Cell> cell, BoxStream& box, LiveSockets& live,
                                LogEntry entry, std::string sni, uint16_t port) {
  const ProxyOptions& options = cell->options();
  auto ctx = cell->boxTlsFor(sni);
  if (!ctx) {
    entry.reason = ctx.error().message();
    cell->log(entry);
    co_return;
  }
  auto secrets = cell->secrets();  // this connection keeps the set it started with
  std::vector<const Secret*> bound;
  std::vector<const Secret*> all;
  for (const Secret& s : *secrets) {
    all.push_back(&s);
    if (bindsHost(s, sni)) bound.push_back(&s);
  }
  ssl::stream<BoxStream&> tls(box, **ctx);
  box.next_layer().expires_after(options.first_bytes_timeout);
  error_code ec;
  co_await tls.async_handshake(ssl::stream_base::server,
                               asio::redirect_error(asio::use_awaitable, ec));
  box.next_layer().expires_never();
  if (ec) {
    entry.reason = "TLS with the box failed (does it trust its hutch CA?): " + ec.message();
    cell->log(entry);
    co_return;
  }
  TlsUpstream up;
  beast::flat_buffer buffer;
  beast::flat_buffer up_buffer;
  bool first = true;
  for (;;) {
    http::request_parser<http::buffer_body> p;
    p.header_limit(kHeaderLimit);
    p.body_limit(std::numeric_limits<std::uint64_t>::max());
    box.next_layer().expires_after(first ? options.first_bytes_timeout : options.idle_timeout);
    co_await http::async_read_header(tls, buffer, p, asio::redirect_error(asio::use_awaitable, ec));
    box.next_layer().expires_never();
    if (ec) break;
    first = false;
    auto& req = p.get();
    auto host_field = req.find(http::field::host);
    std::string_view host_value =
        host_field == req.end()
            ? std::string_view()
            : std::string_view(host_field->value().data(), host_field->value().size());
    if (!hostMatches(host_value, sni)) {
      LogEntry refused = cell->newEntry(entry.proto, sni, port);
      refused.address = entry.address;
      refused.reason = host_value.empty() ? "a request without a Host header on TLS for " + sni
                                          : "Host header " + std::string(host_value) +
                                                " does not match the TLS server name " + sni;
      cell->log(refused);
      co_await writeProxyAnswer(tls, http::status::misdirected_request, "hutch: " + refused.reason,
                                req.version());
      break;
    }
    if (!up.stream) {
      auto connected = co_await connectTls(cell, sni, port);
      if (!connected) {
        bool refused = connected.error().code() == Errc::kFailedPrecondition;
        if (refused) entry.allowed = false;
        entry.reason = connected.error().message();
        co_await writeProxyAnswer(tls,
                                  refused ? http::status::forbidden : http::status::bad_gateway,
                                  "hutch: " + connected.error().message(), req.version());
        break;
      }
      up = std::move(*connected);
      entry.address = up.address;
      live.upstream = &up.stream->next_layer().socket();
    }
    if (!bound.empty()) {
      injectSecrets(req, bound);
      if (entry.requests.size() < LogEntry::kMaxLoggedRequests) {
        std::string line = std::string(req.method_string()) + " " + std::string(req.target());
        if (line.size() > LogEntry::kMaxLoggedRequestLine) {
          line.resize(LogEntry::kMaxLoggedRequestLine);
        }
        entry.requests.push_back(std::move(line));
      }
      for (const Secret* s : bound) {
        if (std::find(entry.secrets.begin(), entry.secrets.end(), s->name) == entry.secrets.end()) {
          entry.secrets.push_back(s->name);
        }
      }
    }
    if (req[http::field::expect] == "100-continue") {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      co_await asio::async_write(tls, asio::buffer(kContinue),
                                 asio::redirect_error(asio::use_awaitable, ec));
      req.erase(http::field::expect);
    }
    bool head = req.method() == http::verb::head;
    bool keep_alive = req.keep_alive();
    ec = co_await relayMessage(tls, buffer, p, *up.stream, entry.bytes_up);
    if (ec) break;
    UpstreamTls& upstream = *up.stream;
    TunnelEnd end = [&box, &upstream](bool, bool) {
      error_code ignored;
      upstream.next_layer().socket().close(ignored);
      box.next_layer().socket().close(ignored);
    };
    auto scrub = [&all](http::response_header<>& res) { scrubSecrets(res, all); };
    ResponseOutcome outcome =
        co_await relayResponses(upstream, up_buffer, tls, buffer, head, keep_alive, entry.bytes_up,
                                entry.bytes_down, scrub, end, options.response_timeout);
    if (outcome == ResponseOutcome::kNoResponse) {
      entry.reason = "the upstream closed without answering";
      co_await writeProxyAnswer(tls, http::status::bad_gateway,
                                "hutch: " + sni + " closed the connection without answering");
      break;
    }
    if (outcome == ResponseOutcome::kClose) break;
  }
  live.upstream = nullptr;
  cell->log(entry);
}

}  // namespace hutch::egress::proxy

#include "egress/proxy/upstream.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>

namespace hutch::egress::proxy {

namespace {

constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

int selectHttp11(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
                 const unsigned char* in, unsigned int inlen, void* /*arg*/) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kAlpnHttp11, sizeof kAlpnHttp11, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;  // no ALPN then: the client falls back to HTTP/1.1
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace

asio::awaitable<Result<std::vector<asio::ip::address>>> UpstreamResolver::resolve(
    std::string host) const {
  std::string key = lower(host);
  if (!key.empty() && key.back() == '.') key.pop_back();
  if (auto it = overrides_.find(key); it != overrides_.end()) co_return it->second;
  auto ex = co_await asio::this_coro::executor;
  tcp::resolver resolver(ex);
  error_code ec;
  auto results =
      co_await resolver.async_resolve(key, "", asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    co_return fail(Errc::kUnavailable, "Cannot resolve " + key + ": " + ec.message());
  }
  std::vector<asio::ip::address> out;
  for (const auto& entry : results) {
    auto a = entry.endpoint().address();
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  if (out.empty()) co_return fail(Errc::kUnavailable, "Cannot resolve " + key + ": no address");
  co_return out;
}

asio::awaitable<Result<Upstream>> connectUpstream(const UpstreamResolver& resolver,
                                                  const AddressFilter& filter, std::string host,
                                                  uint16_t port, std::chrono::milliseconds timeout,
                                                  std::vector<IpNetwork> allow_private) {
  error_code literal;
  asio::ip::make_address(host, literal);
  if (!literal) {
    co_return fail(Errc::kFailedPrecondition, "refusing to connect to the raw IP " + host);
  }
  HUTCH_CO_TRY(auto addresses, co_await resolver.resolve(host));
  std::string refused;
  std::string failed;
  auto ex = co_await asio::this_coro::executor;
  for (const auto& address : addresses) {
    if (auto why = filter.refusal(address, allow_private)) {
      if (!refused.empty()) refused += ", ";
      refused += address.to_string() + " (" + *why + ")";
      continue;
    }
    tcp::endpoint endpoint(address, port);
    beast::tcp_stream stream(ex);
    stream.expires_after(timeout);
    error_code ec;
    co_await stream.async_connect(endpoint, asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
      stream.expires_never();
      co_return Upstream{std::move(stream), endpoint};
    }
    if (!failed.empty()) failed += ", ";
    failed += endpoint.address().to_string() + ": " +
              (ec == beast::error::timeout ? std::string("no answer") : ec.message());
  }
  if (failed.empty()) {
    co_return fail(Errc::kFailedPrecondition,
                   "refused upstream address " + refused + " of " + host);
  }
  co_return fail(Errc::kUnavailable,
                 "cannot connect to " + host + ":" + std::to_string(port) + " (" + failed + ")");
}

Result<std::shared_ptr<ssl::context>> makeUpstreamTlsContext(
    const std::optional<std::filesystem::path>& extra_ca) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                   ec);
  ctx->set_default_verify_paths(ec);
  if (ec) {
    return fail(Errc::kInternal, "Cannot load the system trust store: " + ec.message());
  }
  if (extra_ca) {
    ctx->load_verify_file(extra_ca->string(), ec);
    if (ec) {
      return fail(Errc::kInvalidArgument, "Cannot load --upstream-ca " + extra_ca->string() + ": " +
                                              ec.message() +
                                              "; give a readable PEM file of CA certificates");
    }
  }
  ctx->set_verify_mode(ssl::verify_peer, ec);
  SSL_CTX_set_alpn_protos(ctx->native_handle(), kAlpnHttp11, sizeof kAlpnHttp11);
  return ctx;
}

Result<std::shared_ptr<ssl::context>> makeBoxTlsContext(const std::string& cert_pem,
                                                        const std::string& key_pem,
                                                        const std::string& ca_pem) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                       ssl::context::single_dh_use,
                   ec);
  std::string chain = cert_pem + ca_pem;
  ctx->use_certificate_chain(asio::buffer(chain), ec);
  if (!ec) ctx->use_private_key(asio::buffer(key_pem), ssl::context::pem, ec);
  if (ec) return fail(Errc::kInternal, "Cannot load a minted certificate: " + ec.message());
  SSL_CTX_set_alpn_select_cb(ctx->native_handle(), &selectHttp11, nullptr);
  return ctx;
}

}  // namespace hutch::egress::proxy

// What a box sends hutch-egress's HTTP relay (explicit_proxy.cc, plain_http.cc, intercept.cc):
// requests, one after another on a kept-alive connection, each read with Beast's parser and the
// proxy's header limit; the target read as CONNECT's authority or an absolute URI, the Host
// header normalised and checked against a TLS name; secrets injected into the headers; the
// message relayed with its body (relayMessage: chunked stays chunked) to an upstream.
#include <boost/beast/_experimental/test/stream.hpp>
#include <cstdlib>
#include <exception>
#include <limits>

#include "egress/proxy/client_hello.h"
#include "egress/proxy/http_relay.h"
#include "egress/proxy/request_target.h"
#include "egress/proxy/secrets.h"
#include "fuzz_input.h"

namespace {

using namespace hutch::egress::proxy;
using TestStream = beast::test::stream;

const std::vector<Secret>& secrets() {
  static const std::vector<Secret> all = [] {
    auto parsed = parseSecrets(nlohmann::json::parse(R"([
      {"name": "API_KEY", "value": "sk-real-value", "domains": ["api.example.com"],
       "header": "Authorization", "format": "Bearer {value}"},
      {"name": "TOKEN", "value": "tok-real", "domains": ["*.example.com"],
       "placeholder": "HUTCH_TOKEN_PLACEHOLDER"}])"));
    if (!parsed) std::abort();
    return *parsed;
  }();
  return all;
}

asio::awaitable<void> serve(TestStream& box, TestStream& upstream) {
  beast::flat_buffer buffer;
  for (int i = 0; i < 8; ++i) {
    http::request_parser<http::buffer_body> p;
    p.header_limit(kHeaderLimit);
    p.body_limit(std::numeric_limits<std::uint64_t>::max());
    error_code ec;
    co_await http::async_read_header(box, buffer, p, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    auto& req = p.get();
    std::string_view target(req.target().data(), req.target().size());
    std::string host;
    if (req.method() == http::verb::connect) {
      if (auto authority = parseAuthority(target)) host = authority->host;
      co_return;  // the rest is a tunnel's bytes
    }
    auto uri = parseAbsoluteUri(target);
    if (auto* parsed = std::get_if<AbsoluteUri>(&uri)) {
      host = parsed->host;
      req.target(parsed->path);
      req.set(http::field::host, parsed->authority);
    } else if (auto it = req.find(http::field::host); it != req.end()) {
      host = normaliseHost(std::string_view(it->value().data(), it->value().size()));
      (void)hostMatches(std::string_view(it->value().data(), it->value().size()),
                        "api.example.com");
    }
    if (!isValidHostName(host)) host = "api.example.com";
    std::vector<const Secret*> bound;
    for (const Secret& s : secrets()) {
      if (bindsHost(s, host)) bound.push_back(&s);
    }
    injectSecrets(req, bound);
    uint64_t bytes = 0;
    ec = co_await relayMessage(box, buffer, p, upstream, bytes);
    if (ec || !req.keep_alive()) co_return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  asio::io_context ioc;
  TestStream box(ioc);
  TestStream upstream(ioc);
  TestStream sink(ioc);
  upstream.connect(sink);
  box.append(beast::string_view(reinterpret_cast<const char*>(data), size));
  box.close_remote();
  asio::co_spawn(ioc, serve(box, upstream), [](const std::exception_ptr& e) {
    if (e) std::rethrow_exception(e);
  });
  ioc.run();
  return 0;
}

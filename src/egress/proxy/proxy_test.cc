// The proxy end to end in one process, on 127.0.0.1 only: stand-in upstreams (HTTP, HTTPS with
// a test CA, echo), a box whose sockets are loopback listeners, and blocking box-side clients.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/asio/read.hpp>
#include <mutex>
#include <random>

#include "egress/proxy/egress_proxy.h"
#include "egress/proxy/testing/tls_fixtures.h"

namespace hutch::egress::proxy {
namespace {

using namespace std::chrono_literals;
using testing::EchoServer;
using testing::IoThread;
using testing::LogCollector;
using testing::StandInServer;
using testing::TempFile;

constexpr const char* kSecretValue = "real-secret-value-42";
constexpr const char* kPlaceholder = "HUTCH_TOKEN_PLACEHOLDER";

UniqueFd listenTcp(uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  EXPECT_EQ(::listen(fd.get(), 16), 0);
  socklen_t len = sizeof sin;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sin), &len);
  port = ntohs(sin.sin_port);
  return fd;
}

UniqueFd bindUdp() {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  return fd;
}

Policy allowPolicy() {
  Policy p;
  for (const char* name :
       {"api.example.test", "plain.example.test", "echo.example.test", "tunnel.example.test"}) {
    p.allow.push_back(Rule{name, {}});
  }
  p.deny.push_back(Rule{"evil.example.test", {}});
  return p;
}

Secret tokenSecret() {
  Secret s;
  s.name = "token";
  s.value = kSecretValue;
  s.domains = {"api.example.test"};
  s.header = "Authorization";
  s.format = "Bearer {value}";
  s.placeholder = kPlaceholder;
  return s;
}

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto upstream_ca = makeBoxCa("upstream-test");
    ASSERT_TRUE(upstream_ca);
    upstream_ca_ = *upstream_ca;
    auto authority = CertAuthority::load(upstream_ca_);
    ASSERT_TRUE(authority);
    auto leaf = authority->mintLeaf("api.example.test");
    ASSERT_TRUE(leaf);
    auto ctx = makeBoxTlsContext(leaf->cert, leaf->key, upstream_ca_.cert);
    ASSERT_TRUE(ctx);
    auto tunnel_leaf = authority->mintLeaf("tunnel.example.test");
    ASSERT_TRUE(tunnel_leaf);
    auto tunnel_ctx = makeBoxTlsContext(tunnel_leaf->cert, tunnel_leaf->key, upstream_ca_.cert);
    ASSERT_TRUE(tunnel_ctx);
    http_ = std::make_unique<StandInServer>(io_.io(), nullptr);
    https_ = std::make_unique<StandInServer>(io_.io(), *ctx);
    tunnel_https_ = std::make_unique<StandInServer>(io_.io(), *tunnel_ctx);
    echo_ = std::make_unique<EchoServer>(io_.io());
    ca_file_ = std::make_unique<TempFile>(upstream_ca_.cert);
    auto box_ca = makeBoxCa("b1");
    ASSERT_TRUE(box_ca);
    box_ca_ = *box_ca;
  }

  void TearDown() override {
    if (proxy_) io_.run([this] { proxy_.reset(); });
  }

  ProxyOptions testOptions() {
    ProxyOptions options;
    options.upstream_ca = ca_file_->path();
    auto loopback = asio::ip::make_address("127.0.0.1");
    options.resolver = UpstreamResolver({{"api.example.test", {loopback}},
                                         {"plain.example.test", {loopback}},
                                         {"echo.example.test", {loopback}},
                                         {"tunnel.example.test", {loopback}},
                                         {"evil.example.test", {loopback}}});
    options.filter = AddressFilter::allowingLoopbackForTests();
    options.log = log_.sink();
    options.original_destination = [this](tcp::socket&) -> Result<tcp::endpoint> {
      std::lock_guard lock(mu_);
      if (!original_) return fail(Errc::kNotFound, "no original destination (test)");
      return *original_;
    };
    options.first_bytes_timeout = 2s;
    options.dns_upstreams = {asio::ip::udp::endpoint(loopback, 9)};
    return options;
  }

  void startProxy(ProxyOptions options, std::vector<Secret> secrets = {tokenSecret()}) {
    io_.run([&] {
      auto proxy = EgressProxy::create(io_.io(), std::move(options));
      ASSERT_TRUE(proxy) << proxy.error().describe();
      proxy_ = std::move(*proxy);
      BoxSockets sockets{listenTcp(explicit_port_), listenTcp(transparent_port_), bindUdp()};
      auto done = proxy_->configureBox("b1", BoxConfig{allowPolicy(), std::move(secrets), box_ca_},
                                       std::move(sockets));
      ASSERT_TRUE(done) << done.error().describe();
    });
  }

  void setOriginal(uint16_t port) {
    std::lock_guard lock(mu_);
    original_ = tcp::endpoint(asio::ip::make_address("127.0.0.1"), port);
  }

  tcp::socket connect(uint16_t port) {
    tcp::socket socket(client_io_);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    return socket;
  }

  // Sends CONNECT and returns the status code (the socket is then the tunnel).
  unsigned sendConnect(tcp::socket& socket, const std::string& authority) {
    std::string request = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
    asio::write(socket, asio::buffer(request));
    beast::flat_buffer buffer;
    http::response_parser<http::empty_body> parser;
    parser.skip(true);
    http::read_header(socket, buffer, parser);
    if (parser.get().result_int() == 200) {
      EXPECT_EQ(buffer.size(), 0u);
    }
    return parser.get().result_int();
  }

  // TLS to the proxy through `socket`, trusting only the box CA.
  std::unique_ptr<ssl::stream<tcp::socket&>> tlsThrough(tcp::socket& socket, const std::string& sni,
                                                        const std::string& ca_pem) {
    box_tls_ = testing::clientContextTrusting(ca_pem);
    auto stream = std::make_unique<ssl::stream<tcp::socket&>>(socket, *box_tls_);
    SSL_set_tlsext_host_name(stream->native_handle(), sni.c_str());
    SSL_set1_host(stream->native_handle(), sni.c_str());
    stream->handshake(ssl::stream_base::client);
    return stream;
  }

  template <class Stream>
  http::response<http::string_body> get(Stream& stream, const std::string& target,
                                        const std::string& host,
                                        const std::string& authorization = "") {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, host);
    if (!authorization.empty()) req.set(http::field::authorization, authorization);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    return res;
  }

  IoThread io_;
  asio::io_context client_io_;
  LogCollector log_;
  CaPair upstream_ca_;
  CaPair box_ca_;
  std::unique_ptr<StandInServer> http_;
  std::unique_ptr<StandInServer> https_;
  std::unique_ptr<StandInServer> tunnel_https_;
  std::unique_ptr<EchoServer> echo_;
  std::unique_ptr<TempFile> ca_file_;
  std::unique_ptr<EgressProxy> proxy_;
  std::shared_ptr<ssl::context> box_tls_;
  uint16_t explicit_port_ = 0;
  uint16_t transparent_port_ = 0;
  std::mutex mu_;
  std::optional<tcp::endpoint> original_;
};

TEST_F(ProxyTest, ExplicitPlainHttpIsForwardedWithAnOriginFormTarget) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  std::string authority = "plain.example.test:" + std::to_string(http_->port());
  auto res = get(socket, "http://" + authority + "/hello?x=1", authority);
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res.body(), "upstream saw /hello?x=1");
  // Keep-alive: a second request on the same connection.
  res = get(socket, "http://" + authority + "/again", authority);
  EXPECT_EQ(res.body(), "upstream saw /again");
  socket.close();
  auto entry = log_.waitFor([](const LogEntry& e) { return e.proto == "http"; });
  ASSERT_TRUE(entry);
  EXPECT_TRUE(entry->allowed);
  EXPECT_EQ(entry->box, "b1");
  EXPECT_EQ(entry->host, "plain.example.test");
  EXPECT_EQ(entry->port, http_->port());
  EXPECT_EQ(entry->address, "127.0.0.1");
  EXPECT_GT(entry->bytes_up, 0u);
  EXPECT_GT(entry->bytes_down, 0u);
  EXPECT_EQ(http_->connections(), 1);
}

TEST_F(ProxyTest, ExplicitPlainHttpSendsTheUrisAuthorityAsHost) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  std::string authority = "plain.example.test:" + std::to_string(http_->port());
  // The URI names an allowed host; the Host header a denied one, which must not reach the
  // upstream (a virtual-hosting upstream would serve the denied site).
  auto res = get(socket, "http://" + authority + "/vhost", "evil.example.test");
  EXPECT_EQ(res.result_int(), 200u);
  res = get(socket, "http://" + authority + "/again", "");
  EXPECT_EQ(res.result_int(), 200u);
  auto seen = http_->seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].headers["host"], authority);
  EXPECT_EQ(seen[1].headers["host"], authority);
}

TEST_F(ProxyTest, ExplicitPlainHttpToADeniedNameIs403) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  auto res = get(socket, "http://evil.example.test/", "evil.example.test");
  EXPECT_EQ(res.result_int(), 403u);
  EXPECT_NE(res.body().find("blocked by this box's egress policy"), std::string::npos);
  auto entry = log_.waitFor([](const LogEntry& e) { return e.host == "evil.example.test"; });
  ASSERT_TRUE(entry);
  EXPECT_FALSE(entry->allowed);
  EXPECT_EQ(entry->proto, "http");
  EXPECT_EQ(http_->seen().size(), 0u);
}

TEST_F(ProxyTest, ConnectTunnelCarriesBytesExactly) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  ASSERT_EQ(sendConnect(socket, "echo.example.test:" + std::to_string(echo_->port())), 200u);
  std::string sent(100000, '\0');
  std::mt19937 rng(7);
  for (char& c : sent) c = static_cast<char>(rng());
  asio::write(socket, asio::buffer(sent));
  socket.shutdown(tcp::socket::shutdown_send);
  std::string received;
  error_code ec;
  asio::read(socket, asio::dynamic_buffer(received), ec);
  EXPECT_EQ(ec, asio::error::eof);
  EXPECT_TRUE(received == sent) << received.size() << " bytes back";
  auto entry = log_.waitFor([](const LogEntry& e) { return e.proto == "connect"; });
  ASSERT_TRUE(entry);
  EXPECT_TRUE(entry->allowed);
  EXPECT_EQ(entry->bytes_up, sent.size());
  EXPECT_EQ(entry->bytes_down, sent.size());
  EXPECT_EQ(entry->address, "127.0.0.1");
}

TEST_F(ProxyTest, ConnectToADeniedOrUnlistedNameIs403AndLogged) {
  startProxy(testOptions());
  for (std::string host : {"evil.example.test", "unlisted.example.test", "127.0.0.1"}) {
    tcp::socket socket = connect(explicit_port_);
    EXPECT_EQ(sendConnect(socket, host + ":443"), 403u) << host;
    auto entry = log_.waitFor([&](const LogEntry& e) { return e.host == host; });
    ASSERT_TRUE(entry) << host;
    EXPECT_FALSE(entry->allowed);
    EXPECT_EQ(entry->proto, "connect");
  }
}

TEST_F(ProxyTest, TheStrictFilterRefusesLoopbackUpstreams) {
  ProxyOptions options = testOptions();
  options.filter = AddressFilter();  // the default, strict
  startProxy(std::move(options));
  tcp::socket socket = connect(explicit_port_);
  EXPECT_EQ(sendConnect(socket, "echo.example.test:" + std::to_string(echo_->port())), 403u);
  auto entry = log_.waitFor([](const LogEntry& e) { return e.proto == "connect"; });
  ASSERT_TRUE(entry);
  EXPECT_FALSE(entry->allowed);
  EXPECT_NE(entry->reason.find("loopback"), std::string::npos) << entry->reason;
}

TEST_F(ProxyTest, ALivePolicyChangeAppliesToTheNextConnection) {
  startProxy(testOptions());
  std::string authority = "echo.example.test:" + std::to_string(echo_->port());
  tcp::socket open = connect(explicit_port_);
  ASSERT_EQ(sendConnect(open, authority), 200u);
  io_.run([this] {
    Policy none;
    ASSERT_TRUE(proxy_->setPolicy("b1", none));
  });
  tcp::socket next = connect(explicit_port_);
  EXPECT_EQ(sendConnect(next, authority), 403u);
  // The open tunnel keeps going.
  asio::write(open, asio::buffer(std::string("ping")));
  std::string back(4, '\0');
  asio::read(open, asio::buffer(back));
  EXPECT_EQ(back, "ping");
}

TEST_F(ProxyTest, SecretsAreInjectedThroughConnectAndNeverReachTheBox) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  std::string authority = "api.example.test:" + std::to_string(https_->port());
  ASSERT_EQ(sendConnect(socket, authority), 200u);
  auto tls = tlsThrough(socket, "api.example.test", box_ca_.cert);
  auto res = get(*tls, std::string("/v1/models?key=") + kPlaceholder, authority,
                 std::string("Bearer ") + kPlaceholder);
  EXPECT_EQ(res.result_int(), 200u);
  // The upstream got the real value in the secret's header, and only there: the target keeps
  // the placeholder (the rule is a header template).
  auto seen = https_->seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].headers["authorization"], std::string("Bearer ") + kSecretValue);
  EXPECT_EQ(seen[0].target, std::string("/v1/models?key=") + kPlaceholder);
  // It echoed the header back; the box sees the placeholder.
  EXPECT_EQ(res["X-Echo-Authorization"], std::string("Bearer ") + kPlaceholder);
  for (const auto& field : res) {
    EXPECT_EQ(std::string(field.value()).find(kSecretValue), std::string::npos);
  }
  // A second request on the same TLS connection.
  res = get(*tls, "/second", authority);
  EXPECT_EQ(res.body(), "upstream saw /second");
  EXPECT_EQ(https_->connections(), 1);
  socket.close();
  auto entry = log_.waitFor([](const LogEntry& e) { return e.proto == "connect" && e.allowed; });
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->secrets, std::vector<std::string>{"token"});
  EXPECT_GT(entry->bytes_up, 0u);
  EXPECT_GT(entry->bytes_down, 0u);
  for (const LogEntry& e : log_.all()) {
    EXPECT_EQ(toJson(e).dump().find(kSecretValue), std::string::npos);
  }
}

TEST_F(ProxyTest, InterceptedRequestBodiesStreamChunkedAndWithLength) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  std::string authority = "api.example.test:" + std::to_string(https_->port());
  ASSERT_EQ(sendConnect(socket, authority), 200u);
  auto tls = tlsThrough(socket, "api.example.test", box_ca_.cert);
  std::string body(200000, 'x');
  for (bool chunked : {true, false}) {
    http::request<http::string_body> req{http::verb::post, "/upload", 11};
    req.set(http::field::host, authority);
    req.body() = body;
    if (chunked) {
      req.chunked(true);
    } else {
      req.prepare_payload();
    }
    http::write(*tls, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(*tls, buffer, res);
    EXPECT_EQ(res.body(), "upstream saw /upload body " + body) << "chunked " << chunked;
  }
  auto seen = https_->seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].headers["transfer-encoding"], "chunked");
  EXPECT_EQ(seen[1].headers["content-length"], std::to_string(body.size()));
  EXPECT_EQ(seen[1].headers["authorization"], std::string("Bearer ") + kSecretValue);
}

TEST_F(ProxyTest, AHostHeaderOtherThanTheSniIs421) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  ASSERT_EQ(sendConnect(socket, "api.example.test:" + std::to_string(https_->port())), 200u);
  auto tls = tlsThrough(socket, "api.example.test", box_ca_.cert);
  auto res = get(*tls, "/", "plain.example.test");
  EXPECT_EQ(res.result_int(), 421u);
  EXPECT_EQ(https_->seen().size(), 0u);
  auto entry = log_.waitFor([](const LogEntry& e) { return !e.allowed; });
  ASSERT_TRUE(entry);
  EXPECT_NE(entry->reason.find("Host header"), std::string::npos);
}

TEST_F(ProxyTest, AnSniOtherThanTheConnectHostIsRefused) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  ASSERT_EQ(sendConnect(socket, "api.example.test:" + std::to_string(https_->port())), 200u);
  EXPECT_ANY_THROW(tlsThrough(socket, "plain.example.test", box_ca_.cert));
  auto entry = log_.waitFor([](const LogEntry& e) { return !e.allowed; });
  ASSERT_TRUE(entry);
  EXPECT_NE(entry->reason.find("does not match the CONNECT host"), std::string::npos);
}

TEST_F(ProxyTest, AnSniDifferingOnlyInCaseFromTheConnectHostIsIntercepted) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  std::string authority = "api.example.test:" + std::to_string(https_->port());
  ASSERT_EQ(sendConnect(socket, authority), 200u);
  auto tls = tlsThrough(socket, "API.Example.TEST", box_ca_.cert);
  auto res = get(*tls, "/case", "Api.Example.Test:" + std::to_string(https_->port()));
  EXPECT_EQ(res.result_int(), 200u) << res.body();
  ASSERT_EQ(https_->seen().size(), 1u);
  EXPECT_EQ(https_->seen()[0].headers["authorization"], std::string("Bearer ") + kSecretValue);
}

TEST_F(ProxyTest, AnUntrustedUpstreamCertificateIs502) {
  ProxyOptions options = testOptions();
  options.upstream_ca.reset();  // the system store does not know the test CA
  startProxy(std::move(options));
  tcp::socket socket = connect(explicit_port_);
  std::string authority = "api.example.test:" + std::to_string(https_->port());
  ASSERT_EQ(sendConnect(socket, authority), 200u);
  auto tls = tlsThrough(socket, "api.example.test", box_ca_.cert);
  auto res = get(*tls, "/", authority);
  EXPECT_EQ(res.result_int(), 502u);
  EXPECT_NE(res.body().find("certificate"), std::string::npos) << res.body();
  EXPECT_EQ(https_->seen().size(), 0u);
}

TEST_F(ProxyTest, ConnectToAnAllowedHostWithoutSecretsIsNotIntercepted) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  std::string authority = "tunnel.example.test:" + std::to_string(tunnel_https_->port());
  ASSERT_EQ(sendConnect(socket, authority), 200u);
  // The box sees the upstream's own certificate (the test CA), not the box CA.
  auto tls = tlsThrough(socket, "tunnel.example.test", upstream_ca_.cert);
  auto res = get(*tls, "/direct", authority, std::string("Bearer ") + kPlaceholder);
  EXPECT_EQ(res.body(), "upstream saw /direct");
  EXPECT_EQ(tunnel_https_->seen().at(0).headers["authorization"],
            std::string("Bearer ") + kPlaceholder);
}

TEST_F(ProxyTest, TransparentTlsIsDecidedBySniAndTunnelled) {
  startProxy(testOptions());
  setOriginal(tunnel_https_->port());
  tcp::socket socket = connect(transparent_port_);
  auto tls = tlsThrough(socket, "tunnel.example.test", upstream_ca_.cert);
  auto res = get(*tls, "/t", "tunnel.example.test");
  EXPECT_EQ(res.body(), "upstream saw /t");
  socket.close();
  auto entry = log_.waitFor([](const LogEntry& e) { return e.proto == "https"; });
  ASSERT_TRUE(entry);
  EXPECT_TRUE(entry->allowed);
  EXPECT_EQ(entry->host, "tunnel.example.test");
  EXPECT_EQ(entry->port, tunnel_https_->port());
}

TEST_F(ProxyTest, TransparentTlsToABoundHostIsInterceptedWhenTheAddressAgrees) {
  startProxy(testOptions());
  setOriginal(https_->port());  // 127.0.0.1, which api.example.test resolves to
  tcp::socket socket = connect(transparent_port_);
  auto tls = tlsThrough(socket, "api.example.test", box_ca_.cert);
  auto res = get(*tls, "/x", "api.example.test");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(https_->seen().at(0).headers["authorization"], std::string("Bearer ") + kSecretValue);
}

TEST_F(ProxyTest, TransparentTlsToABoundHostAtAnotherAddressIsRefused) {
  startProxy(testOptions());
  {
    std::lock_guard lock(mu_);
    original_ = tcp::endpoint(asio::ip::make_address("203.0.113.9"), 443);
  }
  tcp::socket socket = connect(transparent_port_);
  EXPECT_ANY_THROW(tlsThrough(socket, "api.example.test", box_ca_.cert));
  auto entry = log_.waitFor([](const LogEntry& e) { return !e.allowed; });
  ASSERT_TRUE(entry);
  EXPECT_NE(entry->reason.find("203.0.113.9"), std::string::npos) << entry->reason;
  EXPECT_EQ(https_->seen().size(), 0u);
}

TEST_F(ProxyTest, TransparentHttpIsDecidedByTheHostHeader) {
  startProxy(testOptions());
  setOriginal(http_->port());
  tcp::socket socket = connect(transparent_port_);
  auto res = get(socket, "/plain", "plain.example.test");
  EXPECT_EQ(res.body(), "upstream saw /plain");
  tcp::socket denied = connect(transparent_port_);
  res = get(denied, "/", "evil.example.test");
  EXPECT_EQ(res.result_int(), 403u);
}

TEST_F(ProxyTest, TransparentBytesWithoutANameAreDeniedAsTcp) {
  startProxy(testOptions());
  setOriginal(echo_->port());
  tcp::socket socket = connect(transparent_port_);
  asio::write(socket, asio::buffer(std::string("SSH-2.0-OpenSSH_9.2\r\n")));
  std::string rest;
  error_code ec;
  asio::read(socket, asio::dynamic_buffer(rest), ec);
  EXPECT_TRUE(rest.empty());
  auto entry = log_.waitFor([](const LogEntry& e) { return e.proto == "tcp"; });
  ASSERT_TRUE(entry);
  EXPECT_FALSE(entry->allowed);
  EXPECT_EQ(entry->port, echo_->port());
  EXPECT_EQ(entry->address, "127.0.0.1");
  // TLS without SNI too.
  tcp::socket no_sni = connect(transparent_port_);
  auto hello = testing::clientHello("");
  asio::write(no_sni, asio::buffer(hello));
  entry = log_.waitFor([](const LogEntry& e) {
    return e.proto == "tcp" && e.reason.find("SNI") != std::string::npos;
  });
  EXPECT_TRUE(entry);
}

TEST_F(ProxyTest, RemovingTheBoxClosesItsConnections) {
  startProxy(testOptions());
  tcp::socket socket = connect(explicit_port_);
  ASSERT_EQ(sendConnect(socket, "echo.example.test:" + std::to_string(echo_->port())), 200u);
  io_.run([this] { ASSERT_TRUE(proxy_->removeBox("b1")); });
  std::string rest;
  error_code ec;
  asio::read(socket, asio::dynamic_buffer(rest), ec);
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  error_code refused;
  tcp::socket again(client_io_);
  again.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), explicit_port_), refused);
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace hutch::egress::proxy

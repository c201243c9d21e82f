// The server's chain on real sockets: a TLS and a plain TCP listener and the unix socket, a
// blocking Beast client. Routes are test routes; the keys are real (an in-memory database).
#include "api/http_server.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "api/error_mapping.h"
#include "storage/box_store.h"
#include "tls/server_cert.h"
#include "tls/x509.h"

namespace hutch::api {
namespace {

using tcp = asio::ip::tcp;

struct Answer {
  int status = 0;
  std::string body;
  http::fields headers;
  bool closed = false;  // the server closed the connection after answering
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("http-server-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto opened = storage::BoxStore::open(":memory:");
    ASSERT_TRUE(opened);
    db_.emplace(std::move(*opened));
    key_store_.emplace(db_->database());
    keys_.emplace(*key_store_);
    user_ = keys_->create({.name = "user"})->secret;
    admin_ = keys_->create({.name = "admin", .admin = true})->secret;

    router_.add(http::verb::get, "/v1/hello",
                [](RequestContext& ctx) -> asio::awaitable<std::optional<Response>> {
                  co_return jsonResponse(http::status::ok, {{"caller", ctx.principal.key_name},
                                                            {"admin", ctx.principal.admin}});
                });
    router_.add(http::verb::get, "/v1/admin-only",
                Route(
                    [](RequestContext&) -> asio::awaitable<std::optional<Response>> {
                      co_return jsonResponse(http::status::ok, {{"ok", true}});
                    },
                    {.access = Access::kAdmin}));
    router_.add(http::verb::get, "/v1/boxes/{box}",
                [](RequestContext& ctx) -> asio::awaitable<std::optional<Response>> {
                  co_return jsonResponse(http::status::ok, {{"box", ctx.params.at("box")}});
                });
    // Holds its request until the connection goes (or a minute passes): a busy session.
    router_.add(http::verb::get, "/v1/hang",
                [this](RequestContext&) -> asio::awaitable<std::optional<Response>> {
                  hanging_.set_value();
                  asio::steady_timer timer(co_await asio::this_coro::executor,
                                           std::chrono::minutes(1));
                  boost::system::error_code ec;
                  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
                  co_return jsonResponse(http::status::ok, {{"waited", true}});
                });
    router_.add(http::verb::post, "/v1/echo",
                [](RequestContext& ctx) -> asio::awaitable<std::optional<Response>> {
                  co_return jsonResponse(http::status::ok, {{"size", ctx.request.body().size()}});
                });
    router_.add(http::verb::put, "/v1/upload",
                Route(
                    [](RequestContext& ctx) -> asio::awaitable<std::optional<Response>> {
                      uint64_t total = 0;
                      uint64_t sum = 0;
                      while (true) {
                        auto chunk = co_await ctx.body->read();
                        if (!chunk) co_return errorResponse(chunk.error());
                        if (chunk->empty()) break;
                        total += chunk->size();
                        for (unsigned char c : *chunk) sum += c;
                      }
                      co_return jsonResponse(http::status::ok, {{"size", total}, {"sum", sum}});
                    },
                    {.stream_body = true}));

    // Another API beside hutch's: requests with an X-Plane-Box header, authenticated by a
    // per-box token of its own, errors in its own format.
    plane_router_.add(http::verb::get, "/plane/whoami",
                      [](RequestContext& ctx) -> asio::awaitable<std::optional<Response>> {
                        co_return jsonResponse(
                            http::status::ok,
                            {{"box", ctx.params.at("box")}, {"caller", ctx.principal.key_name}});
                      });

    server_.emplace(io_.get_executor(), router_, &*keys_);
    Plane plane;
    plane.name = "test";
    plane.claims = [](const http::request_header<>& h, std::string_view) {
      return !h["X-Plane-Box"].empty();
    };
    plane.router = &plane_router_;
    plane.authenticate = [](const http::request_header<>& h, const PathParams&,
                            PathParams& params) -> Result<Principal> {
      if (h["X-Plane-Token"] != "token-of-" + std::string(h["X-Plane-Box"])) {
        return fail(Errc::kUnauthenticated, "wrong plane token");
      }
      params["box"] = std::string(h["X-Plane-Box"]);
      Principal p;
      p.kind = Principal::Kind::kKey;
      p.key_name = "plane-owner";
      p.admin = false;
      return p;
    };
    plane.render = [](const Error& e, std::string_view path) {
      return jsonResponse(static_cast<http::status>(httpStatus(e.code())),
                          {{"plane_error", e.message()}, {"path", path}});
    };
    server_->addPlane(std::move(plane));
    // {box}: "mine" belongs to key "user", "theirs" to nobody the user may see.
    server_->setScoper([](const Principal& p, PathParams& params) -> Result<> {
      auto it = params.find("box");
      if (it == params.end()) return ok();
      if (it->second == "mine" || (p.seesEverything() && it->second == "theirs")) {
        it->second = "id-of-" + it->second;
        return ok();
      }
      return fail(Errc::kNotFound, "No such box: '" + it->second + "'");
    });
    std::vector<std::string> names{"localhost"};
    std::vector<std::string> ips{"127.0.0.1"};
    auto files = tls::ensureSelfSigned(dir_ / "tls", names, ips);
    ASSERT_TRUE(files);
    cert_ = files->cert;
    auto ctx = serverTlsContext(files->cert.string(), files->key.string());
    ASSERT_TRUE(ctx) << ctx.error().describe();
    tls_.emplace(std::move(*ctx));
    auto https = server_->listenTcp("127.0.0.1:0", &*tls_);
    ASSERT_TRUE(https) << https.error().describe();
    https_port_ = portOf(*https);
    auto plain = server_->listenTcp("127.0.0.1:0", nullptr);
    ASSERT_TRUE(plain);
    http_port_ = portOf(*plain);
    ASSERT_TRUE(server_->listen(dir_ / "api.sock", 0600));
    thread_ = std::thread([this] { io_.run(); });
  }

  void TearDown() override {
    asio::post(io_, [this] {
      server_->stop();
      io_.stop();
    });
    thread_.join();
    std::filesystem::remove_all(dir_);
  }

  static uint16_t portOf(const std::string& where) {
    return static_cast<uint16_t>(std::stoul(where.substr(where.rfind(':') + 1)));
  }

  template <class Stream>
  static Answer exchange(Stream& stream, http::request<http::string_body> req) {
    req.set(http::field::host, "localhost");
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    while (res.result() == http::status::continue_) {  // an interim answer; the real one follows
      res = {};
      http::read(stream, buffer, res);
    }
    Answer a{static_cast<int>(res.result_int()), res.body(), res.base(), !res.keep_alive()};
    return a;
  }

  static http::request<http::string_body> get(const std::string& target,
                                              const std::string& key = {}) {
    http::request<http::string_body> req{http::verb::get, target, 11};
    if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
    return req;
  }

  Answer overHttp(http::request<http::string_body> req) {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), http_port_));
    return exchange(socket, std::move(req));
  }

  Answer overHttps(http::request<http::string_body> req, std::string* fingerprint = nullptr) {
    asio::io_context io;
    asio::ssl::context ctx(asio::ssl::context::tls_client);
    ctx.load_verify_file(cert_.string());
    ctx.set_verify_mode(asio::ssl::verify_peer);
    asio::ssl::stream<tcp::socket> stream(io, ctx);
    stream.set_verify_callback(asio::ssl::host_name_verification("localhost"));
    stream.next_layer().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), https_port_));
    stream.handshake(asio::ssl::stream_base::client);
    if (fingerprint) {
      X509* peer = SSL_get1_peer_certificate(stream.native_handle());
      *fingerprint = tls::fingerprintSha256(peer);
      X509_free(peer);
    }
    return exchange(stream, std::move(req));
  }

  Answer overUnix(http::request<http::string_body> req) {
    asio::io_context io;
    asio::local::stream_protocol::socket socket(io);
    socket.connect((dir_ / "api.sock").string());
    return exchange(socket, std::move(req));
  }

  std::filesystem::path dir_;
  std::optional<storage::BoxStore> db_;
  std::optional<storage::KeyStore> key_store_;
  std::optional<KeyService> keys_;
  std::promise<void> hanging_;
  std::string user_;
  std::string admin_;
  ApiRouter router_;
  ApiRouter plane_router_;
  asio::io_context io_;
  std::optional<HttpServer> server_;
  std::optional<asio::ssl::context> tls_;
  std::filesystem::path cert_;
  uint16_t https_port_ = 0;
  uint16_t http_port_ = 0;
  std::thread thread_;
};

TEST_F(HttpServerTest, TcpNeedsAValidKeyAndSaysSoInJson) {
  Answer none = overHttps(get("/v1/hello"));
  EXPECT_EQ(none.status, 401);
  EXPECT_NE(none.body.find("\"unauthenticated\""), std::string::npos) << none.body;
  EXPECT_EQ(none.headers[http::field::www_authenticate], "Bearer realm=\"hutch\"");
  EXPECT_EQ(overHttps(get("/v1/hello", user_ + "x")).status, 401);
  Answer ok = overHttps(get("/v1/hello", user_));
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_NE(ok.body.find("\"caller\":\"user\""), std::string::npos) << ok.body;
  auto x_api = get("/v1/hello");
  x_api.set("X-API-Key", user_);
  EXPECT_EQ(overHttp(std::move(x_api)).status, 200);
}

TEST_F(HttpServerTest, TheUnixSocketIsTheHostAdministrator) {
  Answer a = overUnix(get("/v1/hello"));
  EXPECT_EQ(a.status, 200);
  EXPECT_NE(a.body.find("\"admin\":true"), std::string::npos) << a.body;
  EXPECT_EQ(overUnix(get("/v1/admin-only")).status, 200);
}

TEST_F(HttpServerTest, NothingIsAnsweredBeforeAuthenticationNotEvenWhichPathsExist) {
  EXPECT_EQ(overHttp(get("/v1/does-not-exist")).status, 401);
  EXPECT_EQ(overHttp(get("/v1/does-not-exist", user_)).status, 404);
  auto wrong_method = get("/v1/hello", user_);
  wrong_method.method(http::verb::delete_);
  EXPECT_EQ(overHttp(std::move(wrong_method)).status, 405);
}

TEST_F(HttpServerTest, AdminRoutesRefuseOtherKeys) {
  Answer refused = overHttps(get("/v1/admin-only", user_));
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(refused.body.find("permission_denied"), std::string::npos);
  EXPECT_EQ(overHttps(get("/v1/admin-only", admin_)).status, 200);
}

TEST_F(HttpServerTest, TheScoperHidesOtherOwnersBoxesAsIfTheyDidNotExist) {
  Answer mine = overHttp(get("/v1/boxes/mine", user_));
  EXPECT_EQ(mine.status, 200);
  EXPECT_NE(mine.body.find("id-of-mine"), std::string::npos) << "the handler sees the id";
  EXPECT_EQ(overHttp(get("/v1/boxes/theirs", user_)).status, 404);
  EXPECT_EQ(overHttp(get("/v1/boxes/theirs", admin_)).status, 200);
}

TEST_F(HttpServerTest, FailedAttemptsAreRateLimitedPerAddressButAValidKeyAlwaysPasses) {
  // Two clients on one address (both 127.0.0.1): one sends a wrong key over and over.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(overHttp(get("/v1/hello", "e2b_wrong")).status, 401);
  Answer limited = overHttp(get("/v1/hello", "e2b_wrong"));
  EXPECT_EQ(limited.status, 429) << "the bad client is slowed down";
  EXPECT_NE(limited.body.find("resource_exhausted"), std::string::npos);
  EXPECT_FALSE(limited.headers[http::field::retry_after].empty());
  EXPECT_EQ(overHttp(get("/v1/hello")).status, 429) << "no key at all counts as a bad one";
  // The other client's valid key passes, over HTTP and HTTPS, while the bad one is still limited.
  EXPECT_EQ(overHttp(get("/v1/hello", user_)).status, 200);
  EXPECT_EQ(overHttps(get("/v1/hello", admin_)).status, 200);
  EXPECT_EQ(overHttp(get("/v1/hello", "e2b_wrong")).status, 429);
  EXPECT_EQ(overUnix(get("/v1/hello")).status, 200) << "the unix socket is not limited";
}

TEST_F(HttpServerTest, TlsServesTheCertificateWhoseFingerprintIsReported) {
  std::string seen;
  ASSERT_EQ(overHttps(get("/v1/hello", user_), &seen).status, 200);
  auto expected = tls::checkCertFiles(cert_, cert_.parent_path() / "key.pem");
  ASSERT_TRUE(expected);
  EXPECT_EQ(seen, *expected);
}

TEST_F(HttpServerTest, TlsSendsNoSessionTicketsSoTheServerIsSilentUntilItAnswers) {
  // A client whose reader thread would process unasked tickets while its writer sends the first
  // request corrupts its own TLS state (Python's websockets sync client did): hutchd sends none.
  asio::io_context io;
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  ctx.load_verify_file(cert_.string());
  ctx.set_verify_mode(asio::ssl::verify_peer);
  asio::ssl::stream<tcp::socket> stream(io, ctx);
  stream.next_layer().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), https_port_));
  stream.handshake(asio::ssl::stream_base::client);
  ASSERT_EQ(SSL_version(stream.native_handle()), TLS1_3_VERSION);
  // Tickets, when sent, come before the first answer: once it is read, they would have been.
  ASSERT_EQ(exchange(stream, get("/v1/hello", user_)).status, 200);
  SSL_SESSION* session = SSL_get1_session(stream.native_handle());
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(SSL_SESSION_is_resumable(session), 0) << "the server sent a session ticket";
  SSL_SESSION_free(session);
}

TEST_F(HttpServerTest, PlainHttpOnTheTlsPortIsNotServed) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), https_port_));
  auto req = get("/v1/hello", user_);
  req.set(http::field::host, "x");
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  boost::system::error_code ec;
  http::read(socket, buffer, res, ec);
  EXPECT_TRUE(ec) << "a plain request to the TLS listener gets no HTTP answer";
}

TEST_F(HttpServerTest, UploadsStreamAndExpectContinueIsAnswered) {
  std::string body(3u << 20, '\0');
  uint64_t sum = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    body[i] = static_cast<char>(i * 31);
    sum += static_cast<unsigned char>(body[i]);
  }
  http::request<http::string_body> req{http::verb::put, "/v1/upload", 11};
  req.set(http::field::authorization, "Bearer " + user_);
  req.set(http::field::expect, "100-continue");
  req.body() = body;
  Answer a = overHttps(std::move(req));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_NE(a.body.find("\"size\":" + std::to_string(body.size())), std::string::npos) << a.body;
  EXPECT_NE(a.body.find("\"sum\":" + std::to_string(sum)), std::string::npos) << a.body;
}

TEST_F(HttpServerTest, JsonBodiesAreLimitedTo8MiB) {
  // Refused on the announced length, before any of the body is read.
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), http_port_));
  std::string head = "POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + user_ +
                     "\r\nContent-Length: " + std::to_string((8u << 20) + 1) + "\r\n\r\n";
  asio::write(socket, asio::buffer(head));
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  EXPECT_EQ(res.result_int(), 400u);
  EXPECT_NE(res.body().find("8 MiB"), std::string::npos) << res.body();
  // A chunked body of that size is refused too.
  http::request<http::string_body> req{http::verb::post, "/v1/echo", 11};
  req.set(http::field::authorization, "Bearer " + user_);
  req.chunked(true);
  req.body() = std::string((8u << 20) + 1, 'x');
  tcp::socket chunked(io);
  chunked.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), http_port_));
  boost::system::error_code ec;
  http::write(chunked, req, ec);  // the server may close before all of it is sent
  http::response<http::string_body> res2;
  beast::flat_buffer buffer2;
  http::read(chunked, buffer2, res2, ec);
  if (!ec) {
    EXPECT_EQ(res2.result_int(), 400u);
  } else {
    EXPECT_TRUE(ec == asio::error::connection_reset || ec == asio::error::eof) << ec.message();
  }
}

TEST_F(HttpServerTest, RemovingAKeyEndsItsSessionsAndItsNextRequestIs401) {
  asio::io_context io;
  tcp::socket idle(io);
  idle.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), http_port_));
  ASSERT_EQ(exchange(idle, get("/v1/hello", user_)).status, 200);  // kept alive
  tcp::socket busy(io);
  busy.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), http_port_));
  auto hang = get("/v1/hang", user_);
  hang.set(http::field::host, "x");
  http::write(busy, hang);
  hanging_.get_future().wait();  // the server is in the middle of it

  std::promise<void> done;
  asio::post(io_, [&] {
    auto removed = keys_->remove("user");
    if (removed) {
      server_->closeSessionsOf(removed->id);
    } else {
      ADD_FAILURE() << removed.error().describe();
    }
    done.set_value();
  });
  done.get_future().wait();
  // The request in progress ends at once, without an answer.
  char byte;
  boost::system::error_code ec;
  busy.read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof) << ec.message();
  // The idle connection carries the client's next request, which is refused like any other.
  Answer next = exchange(idle, get("/v1/hello", user_));
  EXPECT_EQ(next.status, 401);
  EXPECT_NE(next.body.find("unauthenticated"), std::string::npos) << next.body;
}

TEST_F(HttpServerTest, HeadIsGetWithoutABodyAnd405SaysWhatIsAllowed) {
  auto head = get("/v1/hello", user_);
  head.method(http::verb::head);
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), http_port_));
  head.set(http::field::host, "x");
  http::write(socket, head);
  http::response_parser<http::empty_body> parser;
  parser.skip(true);  // a response to HEAD has no body, whatever its Content-Length says
  beast::flat_buffer buffer;
  http::read(socket, buffer, parser);
  EXPECT_EQ(parser.get().result_int(), 200u);
  EXPECT_NE(parser.get()[http::field::content_length], "0");
  // The connection still carries the next request: no body was sent after the header.
  EXPECT_EQ(exchange(socket, get("/v1/hello", user_)).status, 200);

  auto wrong = get("/v1/hello", user_);
  wrong.method(http::verb::put);
  Answer refused = overHttp(std::move(wrong));
  EXPECT_EQ(refused.status, 405);
  EXPECT_EQ(refused.headers[http::field::allow], "GET, HEAD");
}

TEST_F(HttpServerTest, APlaneRoutesAuthenticatesAndRendersItsOwnWay) {
  auto req = [](const std::string& target, const std::string& box, const std::string& token) {
    http::request<http::string_body> r{http::verb::get, target, 11};
    r.set("X-Plane-Box", box);
    r.set("X-Plane-Token", token);
    return r;
  };
  // Its token, not an API key; the scoper still resolves the {box} it added.
  auto ok = overHttp(req("/plane/whoami", "mine", "token-of-mine"));
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(nlohmann::json::parse(ok.body)["box"], "id-of-mine");
  EXPECT_EQ(nlohmann::json::parse(ok.body)["caller"], "plane-owner");
  // A box the plane's caller may not see, a wrong token, a path it lacks: its error format.
  auto hidden = overHttp(req("/plane/whoami", "theirs", "token-of-theirs"));
  EXPECT_EQ(hidden.status, 404);
  EXPECT_TRUE(nlohmann::json::parse(hidden.body).contains("plane_error")) << hidden.body;
  auto wrong = overHttp(req("/plane/whoami", "mine", "guess"));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(nlohmann::json::parse(wrong.body)["plane_error"], "wrong plane token");
  auto missing = overHttp(req("/v1/hello", "mine", "token-of-mine"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(nlohmann::json::parse(missing.body)["path"], "/v1/hello");
  // Without the header the request is hutch's, and an API key is needed again.
  EXPECT_EQ(overHttp(get("/plane/whoami", user_)).status, 404);
  EXPECT_EQ(overHttp(get("/v1/hello")).status, 401);
  // Planes are for TCP only: the unix socket serves hutch's API whatever the headers.
  auto socket_answer = overUnix(req("/v1/hello", "mine", "guess"));
  EXPECT_EQ(socket_answer.status, 200) << socket_answer.body;
}

TEST(RouterPathTest, SegmentsArePercentDecoded) {
  ApiRouter router;
  router.add(
      http::verb::get, "/v1/secrets/{name}",
      [](RequestContext&) -> asio::awaitable<std::optional<Response>> { co_return std::nullopt; });
  auto m = router.match(http::verb::get, "/v1/secrets/A%5FB+C");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->params.at("name"), "A_B+C");
}

TEST(ListenAddressTest, ParsesAndChecksLoopback) {
  EXPECT_TRUE(parseListenAddress("127.0.0.1:8443"));
  EXPECT_TRUE(parseListenAddress("[::1]:0"));
  EXPECT_FALSE(parseListenAddress("localhost:80"));
  EXPECT_FALSE(parseListenAddress("127.0.0.1"));
  EXPECT_FALSE(parseListenAddress("127.0.0.1:99999"));
  EXPECT_FALSE(parseListenAddress("127.0.0.1:8x"));
  EXPECT_TRUE(checkLoopback("127.0.0.1:8080"));
  EXPECT_TRUE(checkLoopback("127.1.2.3:8080"));
  EXPECT_TRUE(checkLoopback("[::1]:8080"));
  auto wide = checkLoopback("0.0.0.0:8080");
  ASSERT_FALSE(wide);
  EXPECT_EQ(wide.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(wide.error().message().find("--listen"), std::string::npos);
  EXPECT_FALSE(checkLoopback("10.1.2.3:8080"));
  EXPECT_FALSE(checkLoopback("[::]:8080"));
}

}  // namespace
}  // namespace hutch::api

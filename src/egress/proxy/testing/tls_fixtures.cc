#include "egress/proxy/testing/tls_fixtures.h"

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>

namespace hutch::egress::proxy::testing {

std::vector<uint8_t> clientHello(const std::string& sni, int max_version) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (max_version != 0) SSL_CTX_set_max_proto_version(ctx, max_version);
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  if (!sni.empty()) SSL_set_tlsext_host_name(ssl, sni.c_str());
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);  // WANT_READ: the ClientHello is in `out`
  char* data = nullptr;
  long n = BIO_get_mem_data(out, &data);
  std::vector<uint8_t> bytes(data, data + n);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return bytes;
}

IoThread::IoThread() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}

IoThread::~IoThread() {
  work_.reset();
  io_.stop();
  thread_.join();
}

void IoThread::run(std::function<void()> f) {
  std::promise<void> done;
  asio::post(io_, [&] {
    f();
    done.set_value();
  });
  done.get_future().wait();
}

struct StandInServer::State {
  explicit State(asio::io_context& io) : acceptor(io) {}
  tcp::acceptor acceptor;
  std::shared_ptr<ssl::context> tls;
  std::mutex mu;
  std::vector<SeenRequest> seen;
  std::atomic<int> connections{0};
};

namespace {

template <class Stream>
asio::awaitable<void> serveRequests(std::shared_ptr<StandInServer::State> state, Stream& stream) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    error_code ec;
    co_await http::async_read(stream, buffer, req, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    SeenRequest seen;
    seen.method = std::string(req.method_string());
    seen.target = std::string(req.target());
    for (const auto& field : req) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      seen.headers[name] = std::string(field.value());
    }
    seen.body = req.body();
    {
      std::lock_guard lock(state->mu);
      state->seen.push_back(seen);
    }
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set("X-Echo-Authorization", seen.headers["authorization"]);
    res.set("X-Echo-Host", seen.headers["host"]);
    res.body() = "upstream saw " + seen.target + (seen.body.empty() ? "" : " body " + seen.body);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !req.keep_alive()) co_return;
  }
}

asio::awaitable<void> serveOne(std::shared_ptr<StandInServer::State> state, tcp::socket socket) {
  state->connections++;
  if (state->tls) {
    ssl::stream<tcp::socket> stream(std::move(socket), *state->tls);
    error_code ec;
    co_await stream.async_handshake(ssl::stream_base::server,
                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    co_await serveRequests(state, stream);
  } else {
    co_await serveRequests(state, socket);
  }
}

asio::awaitable<void> acceptAll(std::shared_ptr<StandInServer::State> state) {
  for (;;) {
    error_code ec;
    tcp::socket socket =
        co_await state->acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    asio::co_spawn(state->acceptor.get_executor(), serveOne(state, std::move(socket)),
                   asio::detached);
  }
}

asio::awaitable<void> echo(tcp::socket socket) {
  std::array<char, 8192> buf;
  for (;;) {
    error_code ec;
    size_t n = co_await socket.async_read_some(asio::buffer(buf),
                                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    co_await asio::async_write(socket, asio::buffer(buf.data(), n),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> echoAccept(std::shared_ptr<tcp::acceptor> acceptor) {
  for (;;) {
    error_code ec;
    tcp::socket socket =
        co_await acceptor->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    asio::co_spawn(acceptor->get_executor(), echo(std::move(socket)), asio::detached);
  }
}

tcp::endpoint loopback() {
  return tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0);
}

}  // namespace

StandInServer::StandInServer(asio::io_context& io, std::shared_ptr<ssl::context> tls)
    : state_(std::make_shared<State>(io)), connections_(state_->connections) {
  state_->tls = std::move(tls);
  state_->acceptor.open(tcp::v4());
  state_->acceptor.bind(loopback());
  state_->acceptor.listen();
  port_ = state_->acceptor.local_endpoint().port();
  asio::co_spawn(io, acceptAll(state_), asio::detached);
}

StandInServer::~StandInServer() {
  auto state = state_;
  asio::post(state->acceptor.get_executor(), [state] {
    error_code ignored;
    state->acceptor.close(ignored);
  });
}

std::vector<SeenRequest> StandInServer::seen() {
  std::lock_guard lock(state_->mu);
  return state_->seen;
}

EchoServer::EchoServer(asio::io_context& io) : acceptor_(std::make_shared<tcp::acceptor>(io)) {
  acceptor_->open(tcp::v4());
  acceptor_->bind(loopback());
  acceptor_->listen();
  port_ = acceptor_->local_endpoint().port();
  asio::co_spawn(io, echoAccept(acceptor_), asio::detached);
}

EchoServer::~EchoServer() {
  auto acceptor = acceptor_;
  asio::post(acceptor->get_executor(), [acceptor] {
    error_code ignored;
    acceptor->close(ignored);
  });
}

void LogCollector::add(const LogEntry& e) {
  std::lock_guard lock(mu_);
  entries_.push_back(e);
  cv_.notify_all();
}

std::optional<LogEntry> LogCollector::waitFor(const std::function<bool(const LogEntry&)>& match) {
  std::unique_lock lock(mu_);
  std::optional<LogEntry> found;
  cv_.wait_for(lock, std::chrono::seconds(5), [&] {
    for (const LogEntry& e : entries_) {
      if (match(e)) {
        found = e;
        return true;
      }
    }
    return false;
  });
  return found;
}

std::vector<LogEntry> LogCollector::all() {
  std::lock_guard lock(mu_);
  return entries_;
}

std::shared_ptr<ssl::context> clientContextTrusting(const std::string& ca_pem) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->add_certificate_authority(asio::buffer(ca_pem));
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

TempFile::TempFile(const std::string& text) {
  char name[] = "/tmp/hutch-egress-test-XXXXXX";
  int fd = mkstemp(name);
  ::close(fd);
  path_ = name;
  std::ofstream(path_) << text;
}

TempFile::~TempFile() {
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

}  // namespace hutch::egress::proxy::testing

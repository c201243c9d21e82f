#include "cli/api_client.h"

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "api/json_model.h"
#include "tls/x509.h"

namespace hutch::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using UnixSocket = asio::local::stream_protocol::socket;
using TcpSocket = asio::ip::tcp::socket;
using TlsStream = asio::ssl::stream<TcpSocket>;

std::string defaultSocketPath() {
  const char* env = std::getenv("HUTCH_SOCKET");
  return env && *env ? env : "/run/hutch/hutchd.sock";
}

std::string Endpoint::describe() const {
  switch (kind) {
    case Kind::kUnix: return "unix:" + socket_path;
    case Kind::kHttp: return fmt::format("http://{}:{}", host, port);
    case Kind::kHttps: return fmt::format("https://{}:{}", host, port);
  }
  return "?";
}

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

Result<Endpoint> resolveEndpoint(const std::string& host_flag, const std::string& socket,
                                 const std::string& ca_cert, const std::string& fingerprint) {
  Endpoint e;
  std::string host = host_flag.empty() ? env("HUTCH_HOST") : host_flag;
  if (host.empty()) {
    e.kind = Endpoint::Kind::kUnix;
    e.socket_path = socket.empty() ? defaultSocketPath() : socket;
    return e;
  }
  auto bad = [&] {
    return fail(Errc::kInvalidArgument,
                "--host (HUTCH_HOST) is https://HOST:PORT, or http://127.0.0.1:PORT for a "
                "loopback listener; got '" +
                    host + "'");
  };
  std::string rest;
  if (host.starts_with("https://")) {
    e.kind = Endpoint::Kind::kHttps;
    rest = host.substr(8);
  } else if (host.starts_with("http://")) {
    e.kind = Endpoint::Kind::kHttp;
    rest = host.substr(7);
  } else {
    return bad();
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || rest.find('/') != std::string::npos) return bad();
  e.host = rest.substr(0, colon);
  if (e.host.size() >= 2 && e.host.front() == '[' && e.host.back() == ']') {
    e.host = e.host.substr(1, e.host.size() - 2);
  }
  try {
    size_t used = 0;
    unsigned long port = std::stoul(rest.substr(colon + 1), &used);
    if (used != rest.size() - colon - 1 || port == 0 || port > 65535) return bad();
    e.port = static_cast<uint16_t>(port);
  } catch (const std::exception&) {
    return bad();
  }
  if (e.host.empty()) return bad();
  e.api_key = env("HUTCH_API_KEY");
  e.ca_cert = ca_cert.empty() ? env("HUTCH_CA_CERT") : ca_cert;
  std::string pin = fingerprint.empty() ? env("HUTCH_FINGERPRINT") : fingerprint;
  if (!pin.empty()) {
    HUTCH_TRY(e.fingerprint, tls::normalizeFingerprint(pin));
  }
  if (e.api_key.empty()) {
    return fail(Errc::kInvalidArgument,
                "A remote hutchd needs an API key: set HUTCH_API_KEY (hutch key create makes one "
                "on the server)");
  }
  return e;
}

namespace {

// One connection to hutchd, of whichever kind the endpoint is. Beast's blocking calls work on
// each alternative through with().
struct Conn {
  asio::io_context io;
  std::unique_ptr<asio::ssl::context> tls_context;
  std::variant<std::monostate, UnixSocket, TcpSocket, std::unique_ptr<TlsStream>> stream;
  beast::flat_buffer buffer;

  template <class F>
  auto with(F&& f) {
    return std::visit(
        [&](auto& s) {
          if constexpr (std::is_same_v<std::decay_t<decltype(s)>, std::unique_ptr<TlsStream>>) {
            return f(*s);
          } else if constexpr (std::is_same_v<std::decay_t<decltype(s)>, std::monostate>) {
            UnixSocket never(io);  // not reached: connect() always sets a stream
            return f(never);
          } else {
            return f(s);
          }
        },
        stream);
  }
};

Error unreachable(const Endpoint& e, const std::string& why) {
  if (e.kind == Endpoint::Kind::kUnix) {
    return Error(Errc::kUnavailable,
                 fmt::format("hutchd is not running (cannot connect to {}: {}). Start it with "
                             "'hutchd &' as root, or point HUTCH_SOCKET at its socket",
                             e.socket_path, why));
  }
  return Error(Errc::kUnavailable, fmt::format("Cannot reach hutchd at {}: {}", e.describe(), why));
}

Result<> connect(Conn& c, const Endpoint& e) {
  boost::system::error_code ec;
  if (e.kind == Endpoint::Kind::kUnix) {
    UnixSocket socket(c.io);
    socket.connect(asio::local::stream_protocol::endpoint(e.socket_path), ec);
    if (ec) return fail(unreachable(e, ec.message()));
    c.stream = std::move(socket);
    return ok();
  }
  asio::ip::tcp::resolver resolver(c.io);
  auto found = resolver.resolve(e.host, std::to_string(e.port), ec);
  if (ec) return fail(unreachable(e, "cannot resolve " + e.host + ": " + ec.message()));
  TcpSocket socket(c.io);
  asio::connect(socket, found, ec);
  if (ec) return fail(unreachable(e, ec.message()));
  socket.set_option(asio::ip::tcp::no_delay(true), ec);
  if (e.kind == Endpoint::Kind::kHttp) {
    c.stream = std::move(socket);
    return ok();
  }
  c.tls_context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  auto& ctx = *c.tls_context;
  ctx.set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                  asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  const bool pinned = !e.fingerprint.empty();
  if (pinned) {
    ctx.set_verify_mode(asio::ssl::verify_none);  // the fingerprint is checked below instead
  } else {
    if (!e.ca_cert.empty()) {
      ctx.load_verify_file(e.ca_cert, ec);
      if (ec) {
        return fail(Errc::kInvalidArgument,
                    fmt::format("Cannot use --ca-cert {}: {}", e.ca_cert, ec.message()));
      }
    } else {
      ctx.set_default_verify_paths(ec);
    }
    ctx.set_verify_mode(asio::ssl::verify_peer);
  }
  auto tls = std::make_unique<TlsStream>(std::move(socket), ctx);
  boost::system::error_code ip_ec;
  asio::ip::make_address(e.host, ip_ec);
  if (ip_ec) SSL_set_tlsext_host_name(tls->native_handle(), e.host.c_str());  // SNI for names
  if (!pinned) tls->set_verify_callback(asio::ssl::host_name_verification(e.host));
  tls->handshake(asio::ssl::stream_base::client, ec);
  if (ec) {
    std::string hint = pinned ? ""
                       : e.ca_cert.empty()
                           ? "; for hutchd's own certificate pass --ca-cert FILE or --fingerprint "
                             "SHA256 (hutch doctor on the server prints it)"
                           : "";
    return fail(Errc::kUnavailable,
                fmt::format("TLS with {} failed: {}{}", e.describe(), ec.message(), hint));
  }
  if (pinned) {
    X509* peer = SSL_get1_peer_certificate(tls->native_handle());
    if (peer == nullptr) {
      return fail(Errc::kUnavailable, "The server sent no certificate to check the pin against");
    }
    std::string seen = tls::fingerprintSha256(peer);
    X509_free(peer);
    if (seen != e.fingerprint) {
      return fail(Errc::kUnavailable,
                  fmt::format("The certificate of {} has fingerprint {}, not the pinned {}: "
                              "refusing to talk to it",
                              e.describe(), seen, e.fingerprint));
    }
  }
  c.stream = std::move(tls);
  return ok();
}

using Parser = http::response_parser<http::string_body>;

template <class Body>
void prepare(const Endpoint& e, http::request<Body>& req) {
  req.set(http::field::host, e.kind == Endpoint::Kind::kUnix ? std::string("hutchd") : e.host);
  req.set(http::field::user_agent, "hutch-cli");
  if (e.kind != Endpoint::Kind::kUnix && !e.api_key.empty()) {
    req.set(http::field::authorization, "Bearer " + e.api_key);
  }
  req.prepare_payload();
}

Result<> roundTrip(Conn& c, const Endpoint& e, http::request<http::string_body>& req,
                   Parser& parser, bool header_only) {
  HUTCH_TRY_VOID(connect(c, e));
  prepare(e, req);
  boost::system::error_code ec;
  c.with([&](auto& s) { http::write(s, req, ec); });
  if (ec) return fail(Errc::kUnavailable, "Cannot send the request to hutchd: " + ec.message());
  parser.body_limit(std::numeric_limits<uint64_t>::max());
  c.with([&](auto& s) {
    if (header_only) {
      http::read_header(s, c.buffer, parser, ec);
    } else {
      http::read(s, c.buffer, parser, ec);
    }
  });
  if (ec) {
    return fail(Errc::kUnavailable,
                "hutchd closed the connection without an answer: " + ec.message());
  }
  return ok();
}

Result<json> parseAnswer(const http::response<http::string_body>& res) {
  int status = static_cast<int>(res.result_int());
  if (status >= 300) return fail(api::errorFromResponse(status, res.body()));
  if (res.body().empty()) return json(nullptr);
  json j = json::parse(res.body(), nullptr, false);
  if (j.is_discarded()) return fail(Errc::kProtocol, "hutchd answered with invalid JSON");
  return j;
}

// Pumps bytes between a TLS connection and one end of a socket pair, on its own thread, so
// that code written for a plain descriptor (the exec relay) works over TLS unchanged.
class TlsRelay {
 public:
  TlsRelay(std::unique_ptr<Conn> conn, UniqueFd local) : conn_(std::move(conn)), local_(conn_->io) {
    local_.assign(asio::local::stream_protocol(), local.release());
    auto& tls = *std::get<std::unique_ptr<TlsStream>>(conn_->stream);
    asio::co_spawn(conn_->io, fromServer(tls, local_), asio::detached);
    asio::co_spawn(conn_->io, toServer(tls, local_), asio::detached);
    thread_ = std::thread([this] { conn_->io.run(); });
  }
  ~TlsRelay() {
    asio::post(conn_->io, [this] {
      boost::system::error_code ec;
      local_.close(ec);
      std::get<std::unique_ptr<TlsStream>>(conn_->stream)->next_layer().close(ec);
    });
    thread_.join();
  }

 private:
  static asio::awaitable<void> fromServer(TlsStream& tls, UnixSocket& local) {
    std::string buf(size_t{64} << 10, '\0');
    boost::system::error_code ec;
    while (true) {
      size_t n = co_await tls.async_read_some(asio::buffer(buf),
                                              asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      co_await asio::async_write(local, asio::buffer(buf.data(), n),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
    }
    local.shutdown(asio::socket_base::shutdown_send, ec);
  }
  static asio::awaitable<void> toServer(TlsStream& tls, UnixSocket& local) {
    std::string buf(size_t{64} << 10, '\0');
    boost::system::error_code ec;
    while (true) {
      size_t n = co_await local.async_read_some(asio::buffer(buf),
                                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      co_await asio::async_write(tls, asio::buffer(buf.data(), n),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
    }
    tls.next_layer().shutdown(asio::socket_base::shutdown_send, ec);
  }

  std::unique_ptr<Conn> conn_;
  UnixSocket local_;
  std::thread thread_;
};

}  // namespace

Result<json> ApiClient::call(http::verb method, const std::string& target,
                             const std::optional<json>& body) const {
  Conn c;
  http::request<http::string_body> req{method, target, 11};
  if (body) {
    req.set(http::field::content_type, "application/json");
    req.body() = body->dump();
  }
  Parser parser;
  HUTCH_TRY_VOID(roundTrip(c, endpoint_, req, parser, false));
  return parseAnswer(parser.get());
}

Result<RawResponse> ApiClient::exchange(http::verb method, const std::string& target,
                                        const std::map<std::string, std::string>& headers,
                                        std::string body) const {
  Conn c;
  http::request<http::string_body> req{method, target, 11};
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = std::move(body);
  Parser parser;
  HUTCH_TRY_VOID(roundTrip(c, endpoint_, req, parser, false));
  const auto& res = parser.get();
  RawResponse out;
  out.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    std::string name(field.name_string().data(), field.name_string().size());
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    out.headers[name] = std::string(field.value().data(), field.value().size());
  }
  out.body = res.body();
  return out;
}

Result<std::string> ApiClient::getText(const std::string& target) const {
  Conn c;
  http::request<http::string_body> req{http::verb::get, target, 11};
  Parser parser;
  HUTCH_TRY_VOID(roundTrip(c, endpoint_, req, parser, false));
  const auto& res = parser.get();
  if (res.result_int() >= 300) {
    return fail(api::errorFromResponse(static_cast<int>(res.result_int()), res.body()));
  }
  return res.body();
}

Result<UpgradedStream> ApiClient::upgrade(const std::string& target, const json& body) const {
  return upgradeTo(http::verb::post, target, "hutch-exec", body);
}

Result<UpgradedStream> ApiClient::upgradeTo(http::verb method, const std::string& target,
                                            const std::string& protocol,
                                            const std::optional<json>& body) const {
  auto c = std::make_unique<Conn>();
  http::request<http::string_body> req{method, target, 11};
  if (body) {
    req.set(http::field::content_type, "application/json");
    req.body() = body->dump();
  }
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::upgrade, protocol);
  Parser parser;
  HUTCH_TRY_VOID(roundTrip(*c, endpoint_, req, parser, true));
  if (parser.get().result() != http::status::switching_protocols) {
    // The header was read alone: read the error body too.
    boost::system::error_code ec;
    c->with([&](auto& s) { http::read(s, c->buffer, parser, ec); });
    return parseAnswer(parser.get()).and_then([](const json&) -> Result<UpgradedStream> {
      return fail(Errc::kProtocol, "hutchd did not switch protocols");
    });
  }
  UpgradedStream stream;
  auto data = c->buffer.data();
  stream.leftover.assign(static_cast<const char*>(data.data()), data.size());
  if (auto* unix_socket = std::get_if<UnixSocket>(&c->stream)) {
    stream.fd = UniqueFd(unix_socket->release());
  } else if (auto* tcp = std::get_if<TcpSocket>(&c->stream)) {
    stream.fd = UniqueFd(tcp->release());
  } else {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      return fail(sysError("Cannot create a socket pair", errno));
    }
    stream.fd = UniqueFd(pair[0]);
    stream.relay = std::make_shared<TlsRelay>(std::move(c), UniqueFd(pair[1]));
  }
  return stream;
}

namespace {

// Reads the rest of the answer whose header `parser` holds: its NDJSON lines to on_line, or the
// Error a non-2xx answer carries.
Result<> readLines(Conn& c, http::response_parser<http::buffer_body>& parser,
                   const std::function<void(const json&)>& on_line);

// Sends `req` and hands every NDJSON line of the answer to on_line (streamLines).
template <class Request>
Result<> sendForLines(const Endpoint& endpoint, Request& req,
                      const std::function<void(const json&)>& on_line) {
  Conn c;
  req.set(http::field::accept, "application/x-ndjson");
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<uint64_t>::max());
  HUTCH_TRY_VOID(connect(c, endpoint));
  prepare(endpoint, req);
  boost::system::error_code ec;
  c.with([&](auto& s) { http::write(s, req, ec); });
  if (ec) return fail(Errc::kUnavailable, "Cannot send the request to hutchd: " + ec.message());
  c.with([&](auto& s) { http::read_header(s, c.buffer, parser, ec); });
  if (ec) return fail(Errc::kUnavailable, "hutchd closed the connection: " + ec.message());
  return readLines(c, parser, on_line);
}

Result<> readLines(Conn& c, http::response_parser<http::buffer_body>& parser,
                   const std::function<void(const json&)>& on_line) {
  boost::system::error_code ec;
  std::string text;
  std::string chunk(size_t{64} << 10, '\0');
  const bool failed = parser.get().result_int() >= 300;
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    c.with([&](auto& s) { http::read_some(s, c.buffer, parser, ec); });
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return fail(Errc::kUnavailable, "The answer from hutchd broke off: " + ec.message());
    text.append(chunk.data(), chunk.size() - parser.get().body().size);
    if (failed) continue;
    size_t newline;
    while ((newline = text.find('\n')) != std::string::npos) {
      if (newline == 0) {
        text.erase(0, 1);
        continue;
      }
      json line = json::parse(text.substr(0, newline), nullptr, false);
      text.erase(0, newline + 1);
      if (line.is_discarded()) return fail(Errc::kProtocol, "hutchd sent a line that is not JSON");
      on_line(line);
    }
  }
  if (failed) {
    return fail(api::errorFromResponse(static_cast<int>(parser.get().result_int()), text));
  }
  return ok();
}

}  // namespace

Result<> ApiClient::streamLines(http::verb method, const std::string& target,
                                const std::optional<json>& body,
                                const std::function<void(const json&)>& on_line) const {
  http::request<http::string_body> req{method, target, 11};
  if (body) {
    req.set(http::field::content_type, "application/json");
    req.body() = body->dump();
  }
  return sendForLines(endpoint_, req, on_line);
}

Result<> ApiClient::uploadLines(http::verb method, const std::string& target,
                                const std::string& content_type, int body,
                                const std::function<void(const json&)>& on_line,
                                const std::function<void(uint64_t)>& on_sent) const {
  Conn c;
  HUTCH_TRY_VOID(connect(c, endpoint_));
  http::request<http::empty_body> req{method, target, 11};
  req.set(http::field::accept, "application/x-ndjson");
  req.set(http::field::content_type, content_type);
  req.set(http::field::expect, "100-continue");
  prepare(endpoint_, req);
  req.erase(http::field::content_length);  // prepare's, for an empty body
  req.chunked(true);
  http::request_serializer<http::empty_body> serializer(req);
  boost::system::error_code ec;
  c.with([&](auto& s) { http::write_header(s, serializer, ec); });
  if (ec) return fail(Errc::kUnavailable, "Cannot send the request to hutchd: " + ec.message());
  // 100 Continue, or already the answer (a refusal).
  auto parser = std::make_unique<http::response_parser<http::buffer_body>>();
  parser->body_limit(std::numeric_limits<uint64_t>::max());
  c.with([&](auto& s) { http::read_header(s, c.buffer, *parser, ec); });
  if (ec) return fail(Errc::kUnavailable, "hutchd closed the connection: " + ec.message());
  if (parser->get().result() != http::status::continue_) return readLines(c, *parser, on_line);

  std::vector<char> buf(size_t{256} << 10);
  uint64_t sent = 0;
  std::optional<std::string> broken;  // why hutchd stopped taking the body
  while (true) {
    const ssize_t n = ::read(body, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(sysError("Cannot read what is to be sent", errno));
    if (n == 0) break;
    c.with([&](auto& s) {
      asio::write(s, http::make_chunk(asio::buffer(buf.data(), static_cast<size_t>(n))), ec);
    });
    if (ec) {
      broken = ec.message();
      break;
    }
    sent += static_cast<uint64_t>(n);
    if (on_sent) on_sent(sent);
  }
  if (!broken) {
    c.with([&](auto& s) { asio::write(s, http::make_chunk_last(), ec); });
    if (ec) broken = ec.message();
  }
  // The answer: hutchd may have sent it (an error) and closed while the body was still going.
  parser = std::make_unique<http::response_parser<http::buffer_body>>();
  parser->body_limit(std::numeric_limits<uint64_t>::max());
  c.with([&](auto& s) { http::read_header(s, c.buffer, *parser, ec); });
  if (ec) {
    return fail(Errc::kUnavailable, fmt::format("hutchd closed the connection{}: {}",
                                                broken ? " while the body was sent" : "",
                                                broken.value_or(ec.message())));
  }
  return readLines(c, *parser, on_line);
}

}  // namespace hutch::cli

#include "api/http_server.h"

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "api/error_mapping.h"
#include "api/json_model.h"

namespace hutch::api {

namespace {

constexpr size_t kMaxBody = 8u << 20;
constexpr size_t kMaxHeader = 64u << 10;
constexpr size_t kMaxConnections = 4096;
// A connection that sends no complete request header for this long is closed (keep-alive idle
// time too); a TLS handshake gets kHandshakeTime.
constexpr auto kIdleTime = std::chrono::seconds(120);
constexpr auto kHandshakeTime = std::chrono::seconds(15);

using asio::awaitable;
using asio::redirect_error;
using asio::use_awaitable;

bool quietReadError(const boost::system::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == asio::error::bad_descriptor || ec == asio::ssl::error::stream_truncated;
}

// "Expect: 100-continue" (curl sends it for large uploads): say so before reading the body.
awaitable<bool> sendContinue(Connection& c, const http::request_header<>& header) {
  auto expect = header[http::field::expect];
  if (!beast::iequals(expect, "100-continue")) co_return true;
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  boost::system::error_code ec;
  co_await asio::async_write(c.stream, asio::buffer(kContinue.data(), kContinue.size()),
                             redirect_error(use_awaitable, ec));
  co_return !ec;
}

// Closes the connection's stream when it fires (idle connections, slow handshakes).
//
// A timer that has already expired cannot be cancelled: its handler is queued with success and
// runs after the disarm (the event loop was busy when both the deadline and the awaited read
// came due). So each arming has a number, and a handler closes only if its arming is still the
// current one: a deadline that was disarmed or re-armed never closes a connection in use.
class Watchdog {
 public:
  Watchdog(const asio::any_io_executor& ex, std::weak_ptr<Connection> c, std::string_view what)
      : timer_(ex), connection_(std::move(c)), what_(what) {}
  ~Watchdog() { disarm(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void arm(std::chrono::steady_clock::duration after) {
    const uint64_t arming = ++*current_;
    timer_.expires_after(after);
    timer_.async_wait([c = connection_, current = current_, arming,
                       what = what_](const boost::system::error_code& ec) {
      if (ec || *current != arming) return;
      if (auto live = c.lock()) {
        spdlog::debug("api: closing the connection from {}: {} ({} bytes of a request unread)",
                      live->peer, what, live->buffer.size());
        live->stream.close();
      }
    });
  }
  void disarm() {
    ++*current_;
    timer_.cancel();
  }

 private:
  asio::steady_timer timer_;
  std::weak_ptr<Connection> connection_;
  std::string_view what_;
  std::shared_ptr<uint64_t> current_ = std::make_shared<uint64_t>(0);
};

}  // namespace

Result<asio::ip::tcp::endpoint> parseListenAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return fail(Errc::kInvalidArgument,
                "A listen address is ADDR:PORT (127.0.0.1:8443, [::1]:8443, 0.0.0.0:8443); got '" +
                    address + "'");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(host, ec);
  if (ec) {
    return fail(Errc::kInvalidArgument,
                "The listen address must be an IP address, not '" + host + "': " + ec.message());
  }
  unsigned long port = 0;
  try {
    size_t used = 0;
    port = std::stoul(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1 || port > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    return fail(Errc::kInvalidArgument, "The listen port must be 0-65535 in '" + address + "'");
  }
  return asio::ip::tcp::endpoint(ip, static_cast<uint16_t>(port));
}

Result<> checkLoopback(const std::string& address) {
  HUTCH_TRY(asio::ip::tcp::endpoint endpoint, parseListenAddress(address));
  auto ip = endpoint.address();
  bool loopback = ip.is_loopback() ||
                  (ip.is_v6() && ip.to_v6().is_v4_mapped() && ip.to_v6().to_v4().is_loopback());
  if (!loopback) {
    return fail(Errc::kInvalidArgument,
                "Plain HTTP is served only on a loopback address (127.0.0.1, ::1), where it does "
                "not cross a network; use --listen for HTTPS on " +
                    ip.to_string());
  }
  return ok();
}

Result<asio::ssl::context> serverTlsContext(const std::string& cert_file,
                                            const std::string& key_file) {
  asio::ssl::context context(asio::ssl::context::tls_server);
  boost::system::error_code ec;
  context.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                          asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                      ec);
  if (!ec) context.use_certificate_chain_file(cert_file, ec);
  if (ec) {
    return fail(Errc::kInvalidArgument,
                "Cannot use the TLS certificate " + cert_file + ": " + ec.message());
  }
  context.use_private_key_file(key_file, asio::ssl::context::pem, ec);
  if (ec) {
    return fail(Errc::kInvalidArgument, "Cannot use the TLS key " + key_file + ": " + ec.message());
  }
  // No TLS 1.3 session tickets. OpenSSL sends two right after the handshake, unasked, and a
  // client that reads on one thread while it writes its first request on another (Python's
  // websockets sync client: its reader thread starts before the upgrade request is sent)
  // processes them concurrently with that write on one SSL object, which is not thread-safe:
  // the request was lost and the client waited for an answer forever (a CI failure; made again
  // within a few hundred `exec_session` calls of the Python SDK on a busy host). Without tickets
  // the server sends nothing until it answers. The cost: no session resumption, so every new
  // connection makes a full handshake (about a millisecond of CPU).
  if (SSL_CTX_set_num_tickets(context.native_handle(), 0) != 1) {
    return fail(Errc::kInternal, "Cannot turn off TLS session tickets");
  }
  return context;
}

Response jsonResponse(http::status status, const nlohmann::json& body) {
  Response res{status, 11};
  res.set(http::field::content_type, "application/json");
  // Text from boxes (file names, build logs) need not be UTF-8: replaced, never a throw.
  res.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  res.prepare_payload();
  return res;
}

Response errorResponse(const Error& error) {
  Response res =
      jsonResponse(static_cast<http::status>(httpStatus(error.code())), errorJson(error));
  if (error.code() == Errc::kUnauthenticated) {
    res.set(http::field::www_authenticate, "Bearer realm=\"hutch\"");
  }
  return res;
}

asio::awaitable<bool> ChunkedWriter::start(http::status status, std::string_view content_type,
                                           const http::fields& extra) {
  http::response<http::empty_body> res{status, 11};
  for (const auto& field : extra) res.set(field.name_string(), field.value());
  res.set(http::field::content_type, std::string(content_type));
  res.set(http::field::cache_control, "no-store");
  res.chunked(true);
  http::response_serializer<http::empty_body> serializer(res);
  boost::system::error_code ec;
  co_await http::async_write_header(connection_.stream, serializer,
                                    redirect_error(use_awaitable, ec));
  co_return !ec;
}

asio::awaitable<bool> ChunkedWriter::write(std::string_view data) {
  if (data.empty()) co_return true;  // an empty chunk would end the body
  boost::system::error_code ec;
  co_await asio::async_write(connection_.stream,
                             http::make_chunk(asio::const_buffer(data.data(), data.size())),
                             redirect_error(use_awaitable, ec));
  co_return !ec;
}

asio::awaitable<bool> ChunkedWriter::finish() {
  boost::system::error_code ec;
  co_await asio::async_write(connection_.stream, http::make_chunk_last(),
                             redirect_error(use_awaitable, ec));
  co_return !ec;
}

BodyReader::BodyReader(Connection& connection, http::request_parser<http::empty_body>&& header)
    : connection_(connection), parser_(std::move(header)) {
  parser_.body_limit(std::numeric_limits<uint64_t>::max());
}

awaitable<Result<std::string>> BodyReader::read(size_t max) {
  if (parser_.is_done()) co_return std::string();
  if (!continue_sent_) {
    continue_sent_ = true;
    if (!co_await sendContinue(connection_, parser_.get().base())) {
      co_return fail(Errc::kUnavailable, "The client went away before sending the body");
    }
  }
  if (scratch_.size() < max) scratch_.resize(max);
  // Reads until half the chunk is filled (or the body ends): one read_some gives what one
  // socket read had, often a few KiB, and every chunk costs its consumer a round of work.
  size_t got = 0;
  while (!parser_.is_done() && got < max / 2) {
    parser_.get().body().data = scratch_.data() + got;
    parser_.get().body().size = max - got;
    boost::system::error_code ec;
    co_await http::async_read_some(connection_.stream, connection_.buffer, parser_,
                                   redirect_error(use_awaitable, ec));
    if (ec && ec != http::error::need_buffer) {
      co_return fail(Errc::kUnavailable,
                     "The request body broke off before its end: " + ec.message());
    }
    got = max - parser_.get().body().size;
  }
  co_return std::string(scratch_.data(), got);
}

HttpServer::HttpServer(asio::any_io_executor executor, const ApiRouter& router, KeyService* keys)
    : executor_(std::move(executor)), router_(router), keys_(keys) {}

HttpServer::~HttpServer() {
  stop();
}

Result<> HttpServer::listen(const std::filesystem::path& path, mode_t mode) {
  std::error_code fs_ec;
  std::filesystem::create_directories(path.parent_path(), fs_ec);
  if (fs_ec) {
    return fail(Errc::kInternal, "Cannot create the socket directory " +
                                     path.parent_path().string() + ": " + fs_ec.message());
  }
  // A socket file left by a daemon that died is replaced; a live daemon is not.
  if (std::filesystem::exists(path)) {
    asio::local::stream_protocol::socket probe(executor_);
    boost::system::error_code ec;
    probe.connect(asio::local::stream_protocol::endpoint(path.string()), ec);
    if (!ec) {
      return fail(Errc::kAlreadyExists,
                  "Another hutchd is already serving " + path.string() + "; stop it first");
    }
    std::filesystem::remove(path, fs_ec);
  }
  acceptor_.emplace(executor_);
  boost::system::error_code ec;
  asio::local::stream_protocol::endpoint endpoint(path.string());
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor_.reset();
    return fail(Errc::kInternal, "Cannot listen on " + path.string() + ": " + ec.message());
  }
  ::chmod(path.c_str(), mode);
  path_ = path;
  asio::co_spawn(executor_, acceptLoop(), asio::detached);
  return ok();
}

Result<std::string> HttpServer::listenTcp(const std::string& address, asio::ssl::context* tls) {
  if (keys_ == nullptr) {
    return fail(Errc::kInternal, "A TCP listener needs the key service to authenticate requests");
  }
  HUTCH_TRY(asio::ip::tcp::endpoint endpoint, parseListenAddress(address));
  auto ip = endpoint.address();
  boost::system::error_code ec;
  auto listener = std::make_shared<TcpListener>(
      TcpListener{asio::ip::tcp::acceptor(executor_), tls, std::string()});
  listener->acceptor.open(endpoint.protocol(), ec);
  if (!ec) listener->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec && ip.is_v6()) listener->acceptor.set_option(asio::ip::v6_only(true), ec);
  if (!ec) listener->acceptor.bind(endpoint, ec);
  if (!ec) listener->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return fail(ec == asio::error::address_in_use ? Errc::kAlreadyExists : Errc::kInternal,
                fmt::format("Cannot listen on {}: {}", address, ec.message()));
  }
  auto bound = listener->acceptor.local_endpoint();
  std::string where = bound.address().is_v6()
                          ? fmt::format("[{}]:{}", bound.address().to_string(), bound.port())
                          : fmt::format("{}:{}", bound.address().to_string(), bound.port());
  listener->url = (tls ? "https://" : "http://") + where;
  tcp_.push_back(listener);
  asio::co_spawn(executor_, acceptTcp(listener), asio::detached);
  return where;
}

std::vector<std::string> HttpServer::listeners() const {
  std::vector<std::string> out;
  if (acceptor_) out.push_back("unix:" + path_.string());
  for (const auto& l : tcp_) out.push_back(l->url);
  return out;
}

void HttpServer::stop() {
  if (acceptor_) {
    boost::system::error_code ec;
    acceptor_->close(ec);
    acceptor_.reset();
    std::error_code fs_ec;
    std::filesystem::remove(path_, fs_ec);
  }
  for (auto& l : tcp_) {
    boost::system::error_code ec;
    l->acceptor.close(ec);
  }
  tcp_.clear();
}

void HttpServer::closeSessionsOf(const std::string& key_id) {
  auto& open = connections_->open;
  for (auto it = open.begin(); it != open.end();) {
    auto live = it->second.lock();
    if (!live) {
      it = open.erase(it);
      continue;
    }
    // What the key is doing (an exec, a stream, an upload) ends now. A keep-alive connection
    // between requests stays: its next request is authenticated again and answered 401, where
    // closing it would race the client's reuse of it into a "socket hang up".
    if (live->busy && live->principal.kind == Principal::Kind::kKey &&
        live->principal.key_id == key_id) {
      live->stream.close();
    }
    ++it;
  }
}

awaitable<void> HttpServer::acceptLoop() {
  while (acceptor_ && acceptor_->is_open()) {
    boost::system::error_code ec;
    auto socket = co_await acceptor_->async_accept(redirect_error(use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      spdlog::warn("api: accept failed: {}", ec.message());
      continue;
    }
    auto connection = std::make_shared<Connection>(AnyStream(std::move(socket)));
    connection->peer = "unix";
    asio::co_spawn(executor_, serve(std::move(connection), false), asio::detached);
  }
}

awaitable<void> HttpServer::acceptTcp(std::shared_ptr<TcpListener> listener) {
  while (listener->acceptor.is_open()) {
    boost::system::error_code ec;
    auto socket = co_await listener->acceptor.async_accept(redirect_error(use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) co_return;
      spdlog::warn("api: accept on {} failed: {}", listener->url, ec.message());
      continue;
    }
    std::erase_if(connections_->open, [](const auto& entry) { return entry.second.expired(); });
    if (connections_->open.size() >= kMaxConnections) {
      spdlog::warn("api: {} connections open; refusing one more", connections_->open.size());
      socket.close(ec);
      continue;
    }
    socket.set_option(asio::ip::tcp::no_delay(true), ec);
    asio::co_spawn(executor_, startTcp(std::move(socket), listener->tls), asio::detached);
  }
}

awaitable<void> HttpServer::startTcp(asio::ip::tcp::socket s, asio::ssl::context* tls) {
  boost::system::error_code peer_ec;
  auto remote = s.remote_endpoint(peer_ec);
  std::string peer = peer_ec ? std::string("?") : remote.address().to_string();
  std::shared_ptr<Connection> c;
  if (tls) {
    auto stream = std::make_unique<AnyStream::TlsStream>(std::move(s), *tls);
    AnyStream::TlsStream& raw = *stream;
    c = std::make_shared<Connection>(AnyStream(std::move(stream)));
    c->peer = peer;
    Watchdog handshake_deadline(executor_, c, "no TLS handshake within the time allowed");
    handshake_deadline.arm(kHandshakeTime);
    boost::system::error_code hs_ec;
    co_await raw.async_handshake(asio::ssl::stream_base::server,
                                 redirect_error(use_awaitable, hs_ec));
    handshake_deadline.disarm();
    if (hs_ec) {
      spdlog::debug("api: TLS handshake with {} failed: {}", peer, hs_ec.message());
      c->stream.close();
      co_return;
    }
  } else {
    c = std::make_shared<Connection>(AnyStream(std::move(s)));
  }
  c->peer = peer;
  co_await serve(c, true);
}

std::optional<Error> HttpServer::admit(const http::request_header<>& header, const Route& route,
                                       PathParams& params, Connection& c) {
  if (route.options.access == Access::kAdmin && !c.principal.admin) {
    return Error(
        Errc::kPermissionDenied,
        fmt::format("Only an admin key or the host's unix socket may do this ({} {}); {} is not "
                    "an admin key",
                    std::string(header.method_string()), std::string(header.target()),
                    c.principal.describe()));
  }
  if (scoper_) {
    if (auto scoped = scoper_(c.principal, params); !scoped) return scoped.error();
  }
  return std::nullopt;
}

awaitable<void> HttpServer::serve(std::shared_ptr<Connection> c, bool tcp) {
  std::shared_ptr<Connections> table = connections_;
  uint64_t id = table->next++;
  table->open[id] = c;
  struct Forget {
    std::shared_ptr<Connections> table;
    uint64_t id;
    ~Forget() { table->open.erase(id); }
  } forget{table, id};
  Watchdog idle(executor_, c, "no complete request header within the idle time");
  if (!tcp) c->principal = Principal::host();

  while (true) {
    c->busy = false;
    idle.arm(kIdleTime);
    http::request_parser<http::empty_body> header_parser;
    header_parser.header_limit(kMaxHeader);
    // Bodies are limited where they are read (JSON routes), not by their announced length here.
    header_parser.body_limit(std::numeric_limits<uint64_t>::max());
    boost::system::error_code read_ec;
    co_await http::async_read_header(c->stream, c->buffer, header_parser,
                                     redirect_error(use_awaitable, read_ec));
    bool head = false;  // a HEAD request: answers carry their headers only
    auto respond = [&](Response res, bool keep_alive) -> awaitable<bool> {
      res.keep_alive(keep_alive);
      if (head && !res.body().empty()) {
        // The length a GET would get, and no body.
        size_t length = res.body().size();
        res.body().clear();
        res.content_length(length);
      }
      boost::system::error_code write_ec;
      co_await http::async_write(c->stream, res, redirect_error(use_awaitable, write_ec));
      if (write_ec || !keep_alive) {
        c->stream.close();
        co_return false;
      }
      co_return true;
    };
    if (read_ec) {
      if (!quietReadError(read_ec)) {
        co_await respond(errorResponse(Error(Errc::kInvalidArgument,
                                             "Malformed HTTP request: " + read_ec.message())),
                         false);
      }
      c->stream.close();
      co_return;
    }
    c->busy = true;
    const auto& header = header_parser.get().base();
    // HEAD is GET without the body (RFC 9110): routed as GET, answered with its headers only.
    head = header.method() == http::verb::head;
    // A body we do not read leaves the connection unusable for the next request.
    const bool body_pending = !header_parser.is_done();
    // Copied: the header moves into the body's parser below.
    const std::string target(header.target().data(), header.target().size());
    size_t q = target.find('?');
    const std::string path = target.substr(0, q);
    PathParams query = parseQuery(q == std::string::npos ? std::string() : target.substr(q + 1));
    // Another API's request (TCP only): its router, its authentication, its error bodies.
    const Plane* plane = nullptr;
    if (tcp) {
      for (const Plane& p : planes_) {
        if (p.claims(header, path)) {
          plane = &p;
          break;
        }
      }
    }
    auto render = [plane, &path](const Error& error) {
      return plane != nullptr ? plane->render(error, path) : errorResponse(error);
    };
    const ApiRouter& router = plane != nullptr ? *plane->router : router_;
    PathParams resolved;  // parameters the plane's authentication adds

    // TCP: authenticated before anything else, so that nothing (not even which paths exist)
    // is answered to a caller without a key.
    // A key that authenticates always passes: the failures counted against an address are other
    // clients' too (one host, a NAT, a gateway in front), and must not lock out the good ones.
    // Past the limit, only failed attempts from that address are answered 429 instead of 401,
    // and the connection is closed.
    if (tcp) {
      auto now = FailureLimiter::Clock::now();
      auto principal = plane != nullptr && plane->authenticate
                           ? plane->authenticate(header, query, resolved)
                           : keys_->authenticate(offeredKey(header));
      if (!principal) {
        if (principal.error().code() == Errc::kUnauthenticated) {
          if (auto wait = limiter_.refused(c->peer, now)) {
            Response res = render(Error(
                Errc::kResourceExhausted,
                fmt::format("Too many failed authentications from {}; check the API key this "
                            "client sends (a valid key is still accepted), or try again in {} s",
                            c->peer, *wait)));
            res.set(http::field::retry_after, std::to_string(*wait));
            co_await respond(std::move(res), false);
            co_return;
          }
          limiter_.recordFailure(c->peer, now);
          spdlog::info("api: refused {} {} from {}: {}", std::string(header.method_string()), path,
                       c->peer, principal.error().message());
        }
        if (!co_await respond(render(principal.error()), !body_pending)) co_return;
        continue;
      }
      c->principal = std::move(*principal);
    }

    auto match = router.match(head ? http::verb::get : header.method(), path);
    if (!match) {
      Response res = render(match.error());
      // The router's kUnsupported means "this path exists, not with this method".
      if (match.error().code() == Errc::kUnsupported) {
        res.result(http::status::method_not_allowed);
        std::string allow;
        for (http::verb v : router.methodsFor(path)) {
          if (!allow.empty()) allow += ", ";
          allow += std::string(http::to_string(v));
          if (v == http::verb::get) allow += ", HEAD";
        }
        res.set(http::field::allow, allow);
      }
      if (!co_await respond(std::move(res), header_parser.keep_alive() && !body_pending)) {
        co_return;
      }
      continue;
    }
    const Route& route = *match->handler;
    PathParams params = std::move(match->params);
    params.merge(resolved);
    if (auto refused = admit(header, route, params, *c)) {
      if (!co_await respond(render(*refused), header_parser.keep_alive() && !body_pending)) {
        co_return;
      }
      continue;
    }

    Request request;
    std::optional<BodyReader> reader;
    if (route.options.stream_body) {
      request.base() = header;
      reader.emplace(*c, std::move(header_parser));
    } else {
      if (auto length = header_parser.content_length(); length && *length > kMaxBody) {
        co_await respond(
            render(Error(Errc::kInvalidArgument, fmt::format("The request body is larger than {} "
                                                             "MiB, the limit of JSON requests",
                                                             kMaxBody >> 20))),
            false);
        co_return;
      }
      if (body_pending && !co_await sendContinue(*c, header)) co_return;
      http::request_parser<http::string_body> body_parser(std::move(header_parser));
      body_parser.body_limit(kMaxBody);
      co_await http::async_read(c->stream, c->buffer, body_parser,
                                redirect_error(use_awaitable, read_ec));
      if (read_ec) {
        if (read_ec == http::error::body_limit) {
          co_await respond(
              render(Error(Errc::kInvalidArgument, fmt::format("The request body is larger than {} "
                                                               "MiB, the limit of JSON requests",
                                                               kMaxBody >> 20))),
              false);
        } else if (!quietReadError(read_ec)) {
          co_await respond(render(Error(Errc::kInvalidArgument,
                                        "Malformed HTTP request body: " + read_ec.message())),
                           false);
        }
        c->stream.close();
        co_return;
      }
      request = body_parser.release();
    }
    // The handler may take long (a template build, an exec): no idle deadline while it runs.
    idle.disarm();

    RequestContext ctx{request, std::move(params), std::move(query),
                       c,       c->principal,      reader ? &*reader : nullptr};
    std::optional<Response> res;
    try {
      res = co_await route.handler(ctx);
    } catch (const std::exception& e) {
      spdlog::error("api: handler for {} {} threw: {}", std::string(request.method_string()), path,
                    e.what());
      res = render(Error(Errc::kInternal, std::string("Internal error: ") + e.what()));
    }
    if (!res) {
      if (ctx.keep_alive && request.keep_alive() && c->stream.isOpen()) continue;
      c->stream.close();
      co_return;
    }
    bool keep_alive = request.keep_alive() && (!reader || reader->done());
    if (!co_await respond(std::move(*res), keep_alive)) co_return;
  }
}

}  // namespace hutch::api

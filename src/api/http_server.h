// HTTP/1.1 server (Boost.Beast over Asio) on the unix socket and on TCP listeners, plain or TLS,
// one coroutine per connection on the daemon's event loop.
//
// Every request passes the same chain before its handler (docs/api.md "Remote access"): route
// match; authentication (TCP: an API key, failures rate limited per client address; the unix
// socket: the host administrator); the route's access level (admin only or any key); the scoper,
// which resolves path parameters such as {box} to things the caller may see (404 otherwise); then
// the body is read (up to 8 MiB) unless the route streams it. Handlers return a response, or take
// the connection over (an upgrade, a streamed answer).
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/auth.h"
#include "api/router.h"
#include "api/stream.h"
#include "base/result.h"

namespace hutch::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// A client connection. Shared, so that an upgraded stream's reader and writer keep it alive.
struct Connection {
  explicit Connection(AnyStream s) : stream(std::move(s)) {}
  AnyStream stream;
  beast::flat_buffer buffer;  // bytes read past the request belong to an upgraded stream
  Principal principal;        // who the request being served comes from
  std::string peer;           // the client's address ("unix" on the unix socket)
  bool busy = false;          // a request is being served (not waiting for the next one)
};

// A request body read as it arrives (routes with stream_body): uploads of any size without
// holding them in memory.
class BodyReader {
 public:
  BodyReader(Connection& connection, http::request_parser<http::empty_body>&& header);
  // The next chunk (at most `max` bytes); an empty string once the whole body was read.
  asio::awaitable<Result<std::string>> read(size_t max = size_t{256} << 10);
  bool done() const { return parser_.is_done(); }
  std::optional<uint64_t> contentLength() const {
    auto length = parser_.content_length();
    return length ? std::optional<uint64_t>(*length) : std::nullopt;
  }

 private:
  Connection& connection_;
  http::request_parser<http::buffer_body> parser_;
  bool continue_sent_ = false;
  std::string scratch_;  // what the parser reads into: allocated (and zeroed) once, not per read
};

struct RequestContext {
  const Request& request;  // the header; the body too unless the route streams it
  PathParams params;       // captures from the route pattern (after the scoper)
  PathParams query;
  std::shared_ptr<Connection> connection;
  const Principal& principal;
  BodyReader* body = nullptr;  // routes with stream_body only
  // A handler that returns nullopt after writing a whole response itself sets this when the
  // connection may carry the next request (keep-alive); otherwise the server closes it.
  bool keep_alive = false;
};

// nullopt: the handler took the connection over (it wrote its own response).
using Handler = std::function<asio::awaitable<std::optional<Response>>(RequestContext&)>;

enum class Access {
  kKey,    // any caller: a valid key on TCP, anyone on the unix socket
  kAdmin,  // admin keys and the unix socket only (403 otherwise)
};

struct RouteOptions {
  Access access = Access::kKey;
  bool stream_body = false;  // the handler reads the body itself (RequestContext::body)
};

struct Route {
  template <class F>
  requires std::is_invocable_v<F&, RequestContext&> Route(
      F f, RouteOptions o = {})  // NOLINT(google-explicit-constructor): routes read as handlers
      : handler(std::move(f)), options(o) {}
  Handler handler;
  RouteOptions options;
};
using ApiRouter = Router<Route>;

// Resolves path parameters for a principal before the handler runs: {box} becomes the id of a
// box the caller may see, or the request ends with the scoper's error (404 for another owner's
// box, as for one that does not exist).
using ParamScoper = std::function<Result<>(const Principal&, PathParams&)>;

// "ADDR:PORT" ("127.0.0.1:8443", "[::1]:8443", "0.0.0.0:0") as an endpoint; kInvalidArgument
// saying the form otherwise.
Result<asio::ip::tcp::endpoint> parseListenAddress(const std::string& address);
// kInvalidArgument unless the address is a loopback one (127.0.0.0/8, ::1): plain HTTP is
// served only where nothing crosses a network.
Result<> checkLoopback(const std::string& address);
// A TLS server context (TLS 1.2 or newer) with the certificate chain and key of these files.
Result<asio::ssl::context> serverTlsContext(const std::string& cert_file,
                                            const std::string& key_file);

Response jsonResponse(http::status status, const nlohmann::json& body);
Response errorResponse(const Error& error);

// A response whose body is written as it is made (chunked transfer encoding): NDJSON progress,
// streamed downloads of unknown length. start() writes the header; write() one chunk each;
// finish() the last chunk. Each returns false once the client is gone.
class ChunkedWriter {
 public:
  explicit ChunkedWriter(Connection& connection) : connection_(connection) {}
  asio::awaitable<bool> start(http::status status, std::string_view content_type,
                              const http::fields& extra = {});
  asio::awaitable<bool> write(std::string_view data);
  asio::awaitable<bool> finish();

 private:
  Connection& connection_;
};

// Another API served on the TCP listeners beside hutch's own (the E2B façade, docs/e2b.md):
// the requests it claims are routed in its router, authenticated its way, and the server's own
// errors (401, 404, 405, a body too large) are rendered its way.
struct Plane {
  std::string name;
  std::function<bool(const http::request_header<>& header, std::string_view path)> claims;
  const ApiRouter* router = nullptr;
  // Authenticates a request: the principal, adding path parameters (such as {box}) it
  // resolves. Null: the API key, as hutch's own API.
  std::function<Result<Principal>(const http::request_header<>& header, const PathParams& query,
                                  PathParams& params)>
      authenticate;
  std::function<Response(const Error& error, std::string_view path)> render;
};

class HttpServer {
 public:
  // `keys` authenticates TCP requests; it must outlive the server (null: no TCP listeners).
  HttpServer(asio::any_io_executor executor, const ApiRouter& router, KeyService* keys);
  ~HttpServer();

  void setScoper(ParamScoper scoper) { scoper_ = std::move(scoper); }
  // Serves another API on the TCP listeners (never on the unix socket); planes are asked in
  // the order they were added, hutch's own API takes what none claims.
  void addPlane(Plane plane) { planes_.push_back(std::move(plane)); }

  // Binds the unix socket (replacing a stale one) with the given mode and starts accepting.
  // Its callers are the host administrator.
  Result<> listen(const std::filesystem::path& path, mode_t mode);
  // Listens on "ADDR:PORT" ("[::1]:8443"; port 0 picks one); with `tls`, serves HTTPS. Returns
  // the bound endpoint as "ADDR:PORT". `tls` must outlive the server.
  Result<std::string> listenTcp(const std::string& address, asio::ssl::context* tls);
  void stop();

  // Closes every connection whose last request was made with this key (its exec sessions,
  // WebSockets and streams end at once).
  void closeSessionsOf(const std::string& key_id);
  // "unix:PATH", "https://ADDR:PORT", "http://ADDR:PORT".
  std::vector<std::string> listeners() const;

 private:
  struct TcpListener {
    asio::ip::tcp::acceptor acceptor;
    asio::ssl::context* tls = nullptr;
    std::string url;
  };
  asio::awaitable<void> acceptLoop();
  asio::awaitable<void> acceptTcp(std::shared_ptr<TcpListener> listener);
  // A TCP connection: the TLS handshake (bounded in time) when `tls`, then serve().
  asio::awaitable<void> startTcp(asio::ip::tcp::socket socket, asio::ssl::context* tls);
  asio::awaitable<void> serve(std::shared_ptr<Connection> connection, bool tcp);
  // Checks the route's access level and scopes the parameters (after authentication); the
  // response to send instead of running the handler, if any.
  std::optional<Error> admit(const http::request_header<>& header, const Route& route,
                             PathParams& params, Connection& connection);

  asio::any_io_executor executor_;
  const ApiRouter& router_;
  KeyService* keys_;
  ParamScoper scoper_;
  std::vector<Plane> planes_;
  FailureLimiter limiter_;
  std::optional<asio::local::stream_protocol::acceptor> acceptor_;
  std::filesystem::path path_;
  std::vector<std::shared_ptr<TcpListener>> tcp_;
  // The open connections, shared with their coroutines: a coroutine frame destroyed after the
  // server (at shutdown the loop outlives it) still finds its table to leave.
  struct Connections {
    uint64_t next = 1;
    std::map<uint64_t, std::weak_ptr<Connection>> open;
  };
  std::shared_ptr<Connections> connections_ = std::make_shared<Connections>();
};

}  // namespace hutch::api

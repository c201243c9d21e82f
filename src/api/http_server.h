// HTTP/1.1 server on a unix socket (Boost.Beast over Asio), one coroutine per connection on the
// daemon's event loop. Handlers return a response, or take the connection over after an upgrade.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "api/router.h"
#include "base/result.h"

namespace hutch::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// A client connection. Shared, so that an upgraded stream's reader and writer keep it alive.
struct Connection {
  explicit Connection(asio::local::stream_protocol::socket s) : socket(std::move(s)) {}
  asio::local::stream_protocol::socket socket;
  beast::flat_buffer buffer;  // bytes read past the request belong to an upgraded stream
};

struct RequestContext {
  const Request& request;
  PathParams params;  // captures from the route pattern
  PathParams query;
  std::shared_ptr<Connection> connection;
};

// nullopt: the handler took the connection over (it wrote its own response and closes it).
using Handler = std::function<asio::awaitable<std::optional<Response>>(RequestContext&)>;

Response jsonResponse(http::status status, const nlohmann::json& body);
Response errorResponse(const Error& error);

class HttpServer {
 public:
  HttpServer(asio::any_io_executor executor, const Router<Handler>& router);
  ~HttpServer();

  // Binds the socket (replacing a stale one) with the given mode and starts accepting.
  Result<> listen(const std::filesystem::path& path, mode_t mode);
  void stop();

 private:
  asio::awaitable<void> acceptLoop();
  asio::awaitable<void> serve(std::shared_ptr<Connection> connection);
  asio::awaitable<Response> dispatch(Request& request, std::shared_ptr<Connection> connection,
                                     bool& taken_over);

  asio::any_io_executor executor_;
  const Router<Handler>& router_;
  std::optional<asio::local::stream_protocol::acceptor> acceptor_;
  std::filesystem::path path_;
};

}  // namespace hutch::api

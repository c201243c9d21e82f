#include "api/http_server.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "api/error_mapping.h"
#include "api/json_model.h"

namespace hutch::api {

namespace {
constexpr size_t kMaxBody = 8u << 20;
}  // namespace

Response jsonResponse(http::status status, const nlohmann::json& body) {
  Response res{status, 11};
  res.set(http::field::content_type, "application/json");
  res.body() = body.dump() + "\n";
  res.prepare_payload();
  return res;
}

Response errorResponse(const Error& error) {
  return jsonResponse(static_cast<http::status>(httpStatus(error.code())), errorJson(error));
}

HttpServer::HttpServer(asio::any_io_executor executor, const Router<Handler>& router)
    : executor_(std::move(executor)), router_(router) {}

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

void HttpServer::stop() {
  if (acceptor_) {
    boost::system::error_code ec;
    acceptor_->close(ec);
    acceptor_.reset();
    std::error_code fs_ec;
    std::filesystem::remove(path_, fs_ec);
  }
}

asio::awaitable<void> HttpServer::acceptLoop() {
  while (acceptor_ && acceptor_->is_open()) {
    boost::system::error_code ec;
    auto socket = co_await acceptor_->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      spdlog::warn("api: accept failed: {}", ec.message());
      continue;
    }
    auto connection = std::make_shared<Connection>(std::move(socket));
    asio::co_spawn(executor_, serve(std::move(connection)), asio::detached);
  }
}

asio::awaitable<void> HttpServer::serve(std::shared_ptr<Connection> connection) {
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(kMaxBody);
    boost::system::error_code read_ec;
    co_await http::async_read(connection->socket, connection->buffer, parser,
                              asio::redirect_error(asio::use_awaitable, read_ec));
    if (read_ec) {
      if (read_ec != http::error::end_of_stream && read_ec != asio::error::eof &&
          read_ec != asio::error::connection_reset && read_ec != asio::error::operation_aborted) {
        Response res = errorResponse(
            Error(Errc::kInvalidArgument, "Malformed HTTP request: " + read_ec.message()));
        res.keep_alive(false);
        boost::system::error_code ignored;
        co_await http::async_write(connection->socket, res,
                                   asio::redirect_error(asio::use_awaitable, ignored));
      }
      co_return;
    }
    Request request = parser.release();
    bool taken_over = false;
    Response res = co_await dispatch(request, connection, taken_over);
    if (taken_over) co_return;
    res.keep_alive(request.keep_alive());
    boost::system::error_code write_ec;
    co_await http::async_write(connection->socket, res,
                               asio::redirect_error(asio::use_awaitable, write_ec));
    if (write_ec || !res.keep_alive()) co_return;
  }
}

asio::awaitable<Response> HttpServer::dispatch(Request& request,
                                               std::shared_ptr<Connection> connection,
                                               bool& taken_over) {
  std::string_view target(request.target().data(), request.target().size());
  size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  auto match = router_.match(request.method(), path);
  if (!match) {
    Response res = errorResponse(match.error());
    // The router's kUnsupported means "this path exists, not with this method".
    if (match.error().code() == Errc::kUnsupported) res.result(http::status::method_not_allowed);
    co_return res;
  }
  RequestContext ctx{request, std::move(match->params),
                     parseQuery(q == std::string_view::npos ? "" : target.substr(q + 1)),
                     std::move(connection)};
  std::optional<Response> res;
  try {
    res = co_await (*match->handler)(ctx);
  } catch (const std::exception& e) {
    spdlog::error("api: handler for {} {} threw: {}", std::string(request.method_string()), path,
                  e.what());
    co_return errorResponse(Error(Errc::kInternal, std::string("Internal error: ") + e.what()));
  }
  if (!res) {
    taken_over = true;
    co_return Response{};
  }
  co_return std::move(*res);
}

}  // namespace hutch::api

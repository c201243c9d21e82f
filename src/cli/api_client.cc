#include "cli/api_client.h"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdlib>

#include "api/json_model.h"

namespace hutch::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Socket = asio::local::stream_protocol::socket;

std::string defaultSocketPath() {
  const char* env = std::getenv("HUTCH_SOCKET");
  return env && *env ? env : "/run/hutch/hutchd.sock";
}

namespace {

struct Exchange {
  asio::io_context io;
  Socket socket{io};
  beast::flat_buffer buffer;
};

Result<> connect(Exchange& ex, const std::string& path) {
  boost::system::error_code ec;
  ex.socket.connect(asio::local::stream_protocol::endpoint(path), ec);
  if (ec) {
    return fail(Errc::kUnavailable,
                fmt::format("hutchd is not running (cannot connect to {}: {}). Start it with "
                            "'hutchd &' as root, or point HUTCH_SOCKET at its socket",
                            path, ec.message()));
  }
  return ok();
}

using Parser = http::response_parser<http::string_body>;

Result<> roundTrip(Exchange& ex, const std::string& path, http::request<http::string_body>& req,
                   Parser& parser, bool header_only) {
  HUTCH_TRY_VOID(connect(ex, path));
  req.set(http::field::host, "hutchd");
  req.set(http::field::user_agent, "hutch-cli");
  req.prepare_payload();
  boost::system::error_code ec;
  http::write(ex.socket, req, ec);
  if (ec) return fail(Errc::kUnavailable, "Cannot send the request to hutchd: " + ec.message());
  parser.body_limit(std::numeric_limits<uint64_t>::max());
  if (header_only) {
    http::read_header(ex.socket, ex.buffer, parser, ec);
  } else {
    http::read(ex.socket, ex.buffer, parser, ec);
  }
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

}  // namespace

Result<json> ApiClient::call(http::verb method, const std::string& target,
                             const std::optional<json>& body) const {
  Exchange ex;
  http::request<http::string_body> req{method, target, 11};
  if (body) {
    req.set(http::field::content_type, "application/json");
    req.body() = body->dump();
  }
  Parser parser;
  HUTCH_TRY_VOID(roundTrip(ex, socket_path_, req, parser, false));
  return parseAnswer(parser.get());
}

Result<std::string> ApiClient::getText(const std::string& target) const {
  Exchange ex;
  http::request<http::string_body> req{http::verb::get, target, 11};
  Parser parser;
  HUTCH_TRY_VOID(roundTrip(ex, socket_path_, req, parser, false));
  const auto& res = parser.get();
  if (res.result_int() >= 300) {
    return fail(api::errorFromResponse(static_cast<int>(res.result_int()), res.body()));
  }
  return res.body();
}

Result<UpgradedStream> ApiClient::upgrade(const std::string& target, const json& body) const {
  Exchange ex;
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::content_type, "application/json");
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::upgrade, "hutch-exec");
  req.body() = body.dump();
  Parser parser;
  HUTCH_TRY_VOID(roundTrip(ex, socket_path_, req, parser, true));
  if (parser.get().result() != http::status::switching_protocols) {
    // The header was read alone: read the error body too.
    boost::system::error_code ec;
    http::read(ex.socket, ex.buffer, parser, ec);
    return parseAnswer(parser.get()).and_then([](const json&) -> Result<UpgradedStream> {
      return fail(Errc::kProtocol, "hutchd did not switch protocols for exec");
    });
  }
  UpgradedStream stream;
  auto data = ex.buffer.data();
  stream.leftover.assign(static_cast<const char*>(data.data()), data.size());
  stream.fd = UniqueFd(ex.socket.release());
  return stream;
}

}  // namespace hutch::cli

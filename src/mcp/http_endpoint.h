// MCP's Streamable HTTP transport (docs/mcp.md) at /mcp, a route of hutchd's own API: on the
// unix socket (the host administrator; `hutch mcp` relays stdio there) and on the TCP listeners
// behind the same API keys (the server's chain authenticates before the route runs).
//
// POST /mcp carries one JSON-RPC message (or, in 2025-03-26 sessions, a batch) and is answered
// with application/json: a request's response, or 202 for notifications and responses. An
// initialize request starts a session: its id comes back in Mcp-Session-Id and every later
// request must carry it; a session belongs to the principal that made it (another key's
// request with its id is 404, as one that ended). DELETE /mcp ends a session. GET /mcp is 405:
// hutch sends no server-initiated messages. A present Origin must be the server's own
// (DNS rebinding); MCP-Protocol-Version, when sent, must be the session's.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "api/http_server.h"
#include "base/result.h"
#include "mcp/server.h"

namespace hutch::mcp {

inline constexpr std::string_view kEndpointPath = "/mcp";

// kPermissionDenied unless `origin` is absent (empty) or names the server the request was sent
// to: scheme://HOST[:PORT] whose HOST[:PORT] is the Host header (case-insensitive).
Result<> checkOrigin(std::string_view origin, std::string_view host);
// Whether an Accept header admits application/json (absent: anything is admitted).
bool acceptsJson(std::string_view accept);
// Whether a Content-Type is application/json (parameters such as charset allowed).
bool isJsonContentType(std::string_view content_type);

struct EndpointOptions {
  std::chrono::seconds idle_timeout = std::chrono::hours(24);  // unused this long: ended
  size_t max_sessions_per_caller = 64;  // past it, the caller's least recently used ends
};

class HttpEndpoint {
 public:
  explicit HttpEndpoint(Server& server, EndpointOptions options = {})
      : server_(server), options_(options) {}
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // POST and DELETE /mcp on hutch's router (GET is then 405 with Allow: POST, DELETE).
  void addRoutes(api::ApiRouter& router);
  size_t sessionCount() const { return sessions_.size(); }

 private:
  struct Entry {
    std::shared_ptr<Session> session;
    std::string caller;  // whose it is (callerId)
    std::chrono::steady_clock::time_point last_used;
  };

  boost::asio::awaitable<std::optional<api::Response>> post(api::RequestContext& ctx);
  boost::asio::awaitable<std::optional<api::Response>> end(api::RequestContext& ctx);
  // initialize: a new session, kept if the server accepted it.
  boost::asio::awaitable<api::Response> initialize(api::RequestContext& ctx, Request request);
  // The caller's session named by the request's Mcp-Session-Id, or the response refusing it.
  std::variant<std::shared_ptr<Session>, api::Response> session(const api::RequestContext& ctx);
  void keep(std::string id, std::shared_ptr<Session> session, const std::string& caller);

  Server& server_;
  EndpointOptions options_;
  std::map<std::string, Entry, std::less<>> sessions_;
};

}  // namespace hutch::mcp

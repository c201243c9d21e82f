#include "mcp/http_endpoint.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <boost/beast/core/string.hpp>
#include <cerrno>

#include "api/encoding.h"
#include "base/check.h"

namespace hutch::mcp {

namespace {

namespace http = boost::beast::http;
using boost::asio::awaitable;
using Reply = std::optional<api::Response>;

constexpr std::string_view kSessionHeader = "Mcp-Session-Id";
constexpr std::string_view kVersionHeader = "MCP-Protocol-Version";

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A transport-level refusal: the status, and a JSON-RPC error without an id as the body.
api::Response refuse(http::status status, int code, std::string_view message) {
  return api::jsonResponse(status, errorResponse(nullptr, code, message));
}

std::string newSessionId() {
  std::array<unsigned char, 32> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    HUTCH_CHECK(n > 0 || errno == EINTR);  // getrandom on Linux 3.17+ does not fail otherwise
    if (n > 0) got += static_cast<size_t>(n);
  }
  return api::hexEncode(bytes.data(), bytes.size());
}

// Whose a session is: the unix socket's administrator, or one key.
std::string callerId(const api::Principal& p) {
  return p.kind == api::Principal::Kind::kHost ? std::string("host") : "key:" + p.key_id;
}

std::string_view header(const api::RequestContext& ctx, std::string_view name) {
  auto value = ctx.request.base()[boost::beast::string_view(name.data(), name.size())];
  return {value.data(), value.size()};
}

// The single initialize request a body is, if it is one.
std::optional<Request> initializeRequest(const json& body) {
  if (!body.is_object() || body.value("method", json()) != "initialize") return std::nullopt;
  Message m = classify(body);
  if (auto* r = std::get_if<Request>(&m)) return *r;
  return std::nullopt;
}

}  // namespace

Result<> checkOrigin(std::string_view origin, std::string_view host) {
  if (origin.empty()) return ok();  // not a browser: nothing to rebind
  std::string o = lower(trim(origin));
  std::string_view rest;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (std::string_view(o).starts_with(scheme)) rest = std::string_view(o).substr(scheme.size());
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty() || rest.find('/') != std::string_view::npos || lower(trim(host)) != rest) {
    return fail(Errc::kPermissionDenied,
                fmt::format("Origin {} is not this server ({}): MCP requests from web pages of "
                            "other origins are refused",
                            origin, host.empty() ? "no Host header" : host));
  }
  return ok();
}

bool acceptsJson(std::string_view accept) {
  if (trim(accept).empty()) return true;
  std::string a = lower(accept);
  size_t start = 0;
  while (start <= a.size()) {
    size_t comma = a.find(',', start);
    if (comma == std::string::npos) comma = a.size();
    std::string_view item = trim(std::string_view(a).substr(start, comma - start));
    std::string_view type = trim(item.substr(0, item.find(';')));
    // "q=0" refuses a type; anything else admits it.
    bool refused =
        item.find("q=0") != std::string_view::npos && item.find("q=0.") == std::string_view::npos;
    if (!refused && (type == "application/json" || type == "application/*" || type == "*/*")) {
      return true;
    }
    start = comma + 1;
  }
  return false;
}

bool isJsonContentType(std::string_view content_type) {
  std::string type = lower(trim(content_type.substr(0, content_type.find(';'))));
  return type == "application/json";
}

void HttpEndpoint::addRoutes(api::ApiRouter& router) {
  router.add(http::verb::post, kEndpointPath,
             [this](api::RequestContext& ctx) { return post(ctx); });
  router.add(http::verb::delete_, kEndpointPath,
             [this](api::RequestContext& ctx) { return end(ctx); });
}

void HttpEndpoint::keep(std::string id, std::shared_ptr<Session> session,
                        const std::string& caller) {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(sessions_,
                [&](const auto& e) { return now - e.second.last_used > options_.idle_timeout; });
  // One caller's many sessions end its own oldest, never another caller's.
  while (true) {
    auto oldest = sessions_.end();
    size_t count = 0;
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.caller != caller) continue;
      ++count;
      if (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used) {
        oldest = it;
      }
    }
    if (count < options_.max_sessions_per_caller || oldest == sessions_.end()) break;
    sessions_.erase(oldest);
  }
  sessions_[std::move(id)] = Entry{std::move(session), caller, now};
}

std::variant<std::shared_ptr<Session>, api::Response> HttpEndpoint::session(
    const api::RequestContext& ctx) {
  std::string_view id = header(ctx, kSessionHeader);
  if (id.empty()) {
    return refuse(http::status::bad_request, kInvalidRequest,
                  "Bad Request: no Mcp-Session-Id header; send initialize first and then the "
                  "session id it answered with");
  }
  auto it = sessions_.find(id);
  const auto now = std::chrono::steady_clock::now();
  if (it == sessions_.end() || it->second.caller != callerId(ctx.principal) ||
      now - it->second.last_used > options_.idle_timeout) {
    if (it != sessions_.end() && it->second.caller == callerId(ctx.principal)) sessions_.erase(it);
    return refuse(http::status::not_found, kInvalidRequest,
                  "Session not found (it ended or never existed): initialize a new session");
  }
  it->second.last_used = now;
  return it->second.session;
}

awaitable<api::Response> HttpEndpoint::initialize(api::RequestContext& ctx, Request request) {
  auto session = std::make_shared<Session>();
  json response = co_await server_.request(*session, std::move(request), ctx.principal);
  api::Response res = api::jsonResponse(http::status::ok, response);
  if (!session->version.empty()) {
    std::string id = newSessionId();
    res.set(boost::beast::string_view(kSessionHeader.data(), kSessionHeader.size()), id);
    spdlog::info("mcp: session {}… for {} ({} {}, protocol {})", id.substr(0, 8),
                 ctx.principal.describe(), session->client_info.value("name", "?"),
                 session->client_info.value("version", "?"), session->version);
    keep(std::move(id), std::move(session), callerId(ctx.principal));
  }
  co_return res;
}

awaitable<Reply> HttpEndpoint::post(api::RequestContext& ctx) {
  if (auto origin = checkOrigin(header(ctx, "Origin"), header(ctx, "Host")); !origin) {
    co_return refuse(http::status::forbidden, kInvalidRequest,
                     "Forbidden: " + origin.error().message());
  }
  if (!isJsonContentType(header(ctx, "Content-Type"))) {
    co_return refuse(http::status::unsupported_media_type, kInvalidRequest,
                     "Unsupported Media Type: MCP messages are POSTed as application/json");
  }
  if (!acceptsJson(header(ctx, "Accept"))) {
    co_return refuse(http::status::not_acceptable, kInvalidRequest,
                     "Not Acceptable: hutch answers application/json; accept it (with "
                     "text/event-stream, as the transport asks)");
  }
  auto parsed = parseBody(ctx.request.body());
  if (auto* invalid = std::get_if<Invalid>(&parsed)) {
    co_return api::jsonResponse(http::status::bad_request, invalid->error_response);
  }
  const json& body = std::get<json>(parsed);

  if (auto init = initializeRequest(body)) {
    if (!header(ctx, kSessionHeader).empty()) {
      co_return refuse(http::status::bad_request, kInvalidRequest,
                       "Bad Request: initialize starts a new session; send it without "
                       "Mcp-Session-Id");
    }
    co_return co_await initialize(ctx, std::move(*init));
  }
  auto found = session(ctx);
  if (auto* refused = std::get_if<api::Response>(&found)) co_return std::move(*refused);
  std::shared_ptr<Session> s = std::get<std::shared_ptr<Session>>(found);

  if (std::string_view version = header(ctx, kVersionHeader);
      !version.empty() && version != s->version) {
    co_return refuse(
        http::status::bad_request, kInvalidRequest,
        isSupportedVersion(version)
            ? fmt::format("Bad Request: MCP-Protocol-Version {} is not this session's ({})",
                          version, s->version)
            : fmt::format("Bad Request: unsupported MCP-Protocol-Version {}; hutch speaks {}",
                          version, fmt::join(supportedVersions(), ", ")));
  }

  const bool batch = body.is_array();
  if (batch && !allowsBatches(s->version)) {
    co_return refuse(http::status::bad_request, kInvalidRequest,
                     fmt::format("Invalid Request: protocol version {} has no JSON-RPC batches; "
                                 "send one message per POST",
                                 s->version));
  }
  if (batch && body.empty()) {
    co_return refuse(http::status::bad_request, kInvalidRequest, "Invalid Request: an empty batch");
  }
  json responses = json::array();
  bool any_request = false;
  bool any_invalid = false;
  for (const json& item : batch ? body : json::array({body})) {
    Message message = classify(item);
    if (auto* request = std::get_if<Request>(&message)) {
      any_request = true;
      json response = co_await server_.request(*s, std::move(*request), ctx.principal);
      responses.push_back(std::move(response));
    } else if (auto* notification = std::get_if<Notification>(&message)) {
      Server::notification(*s, *notification);
    } else if (auto* invalid = std::get_if<Invalid>(&message)) {
      // With an id it was meant as a request: answered as one (200), with its error.
      if (invalid->error_response["id"].is_null()) {
        any_invalid = true;
      } else {
        any_request = true;
      }
      responses.push_back(std::move(invalid->error_response));
    }
    // A Response answers a request of ours; hutch sends none, so there is nothing to match.
  }
  if (!any_request && !any_invalid) {
    api::Response accepted{http::status::accepted, 11};
    accepted.prepare_payload();
    co_return accepted;
  }
  // Only notifications and responses, some not acceptable: an error status (with the errors).
  http::status status = any_request ? http::status::ok : http::status::bad_request;
  co_return api::jsonResponse(status, batch ? responses : responses.at(0));
}

awaitable<Reply> HttpEndpoint::end(api::RequestContext& ctx) {
  auto found = session(ctx);
  if (auto* refused = std::get_if<api::Response>(&found)) co_return std::move(*refused);
  sessions_.erase(std::string(header(ctx, kSessionHeader)));
  api::Response res{http::status::no_content, 11};
  res.prepare_payload();
  co_return res;
}

}  // namespace hutch::mcp

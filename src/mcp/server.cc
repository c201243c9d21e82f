#include "mcp/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

namespace hutch::mcp {

namespace {

constexpr std::array<std::string_view, 4> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                       "2024-11-05"};

bool atLeast(std::string_view version, std::string_view than) {
  // Versions are dates (YYYY-MM-DD): their text sorts as they do.
  return version >= than;
}

json invalidParams(const json& id, std::string_view message) {
  return errorResponse(id, kInvalidParams, fmt::format("Invalid params: {}", message));
}

}  // namespace

std::span<const std::string_view> supportedVersions() {
  return kVersions;
}

bool isSupportedVersion(std::string_view version) {
  return std::find(kVersions.begin(), kVersions.end(), version) != kVersions.end();
}

std::string negotiateVersion(std::string_view requested) {
  return std::string(isSupportedVersion(requested) ? requested : kLatestVersion);
}

bool allowsBatches(std::string_view version) {
  return !atLeast(version, "2025-06-18");
}

json callToolResult(const ToolResult& result, std::string_view version) {
  std::string text = result.structured.dump(2, ' ', false, json::error_handler_t::replace);
  if (!result.note.empty()) text = result.note + "\n" + text;
  json out{{"content", json::array({json{{"type", "text"}, {"text", std::move(text)}}})}};
  if (result.is_error) out["isError"] = true;
  // structuredContent is a field from 2025-06-18 on (an object there: ours always are).
  if (atLeast(version, "2025-06-18") && result.structured.is_object()) {
    out["structuredContent"] = result.structured;
  }
  return out;
}

json Server::initialize(Session& session, const Request& request) const {
  if (!session.version.empty()) {
    return errorResponse(request.id, kInvalidRequest,
                         "Invalid Request: this session is initialized already; start a new one "
                         "for another initialize");
  }
  const json& p = request.params;
  if (!p.is_object() || !p.contains("protocolVersion") || !p["protocolVersion"].is_string()) {
    return invalidParams(request.id, "initialize needs \"protocolVersion\" (a string such as \"" +
                                         std::string(kLatestVersion) + "\")");
  }
  if (p.contains("capabilities") && !p["capabilities"].is_object()) {
    return invalidParams(request.id, "\"capabilities\" must be an object");
  }
  if (p.contains("clientInfo") && !p["clientInfo"].is_object()) {
    return invalidParams(request.id, "\"clientInfo\" must be an object with name and version");
  }
  session.version = negotiateVersion(p["protocolVersion"].get<std::string>());
  session.client_info = p.value("clientInfo", json::object());
  json server_info{{"name", info_.name}, {"version", info_.version}};
  if (atLeast(session.version, "2025-06-18")) server_info["title"] = "hutch";
  json result{{"protocolVersion", session.version},
              {"capabilities", {{"tools", {{"listChanged", false}}}}},
              {"serverInfo", std::move(server_info)}};
  if (!info_.instructions.empty()) result["instructions"] = info_.instructions;
  return resultResponse(request.id, std::move(result));
}

json Server::toolsList(const Request& request) {
  if (request.params.is_object()) {
    if (auto cursor = request.params.find("cursor"); cursor != request.params.end()) {
      // Every tool is on the one page we answer: no cursor was ever handed out.
      return invalidParams(request.id, "no such cursor: tools/list answers every tool at once");
    }
  }
  return resultResponse(request.id, json{{"tools", tools_.definitions()}});
}

boost::asio::awaitable<json> Server::toolsCall(const Session& session, const Request& request,
                                               const api::Principal& caller) {
  const json& p = request.params;
  if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) {
    co_return invalidParams(request.id, "tools/call needs \"name\", the tool's name (tools/list)");
  }
  std::string name = p["name"];
  if (!tools_.has(name)) {
    co_return invalidParams(request.id,
                            fmt::format("Unknown tool: {} (tools/list names the tools)", name));
  }
  json arguments = json::object();
  if (auto a = p.find("arguments"); a != p.end() && !a->is_null()) {
    if (!a->is_object()) {
      co_return invalidParams(request.id, "\"arguments\" must be an object");
    }
    arguments = *a;
  }
  ToolResult result = co_await tools_.call(std::move(name), std::move(arguments), caller);
  co_return resultResponse(request.id, callToolResult(result, session.version));
}

boost::asio::awaitable<json> Server::request(Session& session, Request request,
                                             api::Principal caller) {
  const std::string& method = request.method;
  if (method == "initialize") co_return initialize(session, request);
  if (method == "ping") co_return resultResponse(request.id, json::object());
  if (session.version.empty()) {
    co_return errorResponse(request.id, kInvalidRequest,
                            fmt::format("Invalid Request: {} before initialize; initialize the "
                                        "session first",
                                        method));
  }
  if (method == "tools/list") co_return toolsList(request);
  if (method == "tools/call") co_return co_await toolsCall(session, request, caller);
  // resources, prompts, logging, completions: capabilities hutch does not declare.
  co_return errorResponse(
      request.id, kMethodNotFound,
      fmt::format("Method not found: {} (hutch serves initialize, ping, tools/list, tools/call)",
                  method));
}

void Server::notification(Session& session, const Notification& notification) {
  if (notification.method == "notifications/initialized") {
    session.initialized = true;
    return;
  }
  // notifications/cancelled: a tool call runs to its end (its timeout bounds it); others
  // (roots, progress) concern capabilities hutch does not use.
  spdlog::debug("mcp: notification {} ignored", notification.method);
}

}  // namespace hutch::mcp

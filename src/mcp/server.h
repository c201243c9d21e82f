// The MCP server (docs/mcp.md): the protocol's methods over one session, whatever carries them.
// hutchd serves it at /mcp (http_endpoint.h); `hutch mcp` relays stdio to that endpoint, so this
// is the only implementation of the protocol in hutch.
//
// Lifecycle (2024-11-05 to 2025-11-25, the "legacy" era of the specification): initialize
// negotiates the version (ours if the client's is one we speak, else our latest) and the
// capabilities (tools only); notifications/initialized; then ping, tools/list and tools/call.
// Tool failures are tool results with isError (the model can act on them); malformed requests
// and unknown tools are JSON-RPC errors.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/auth.h"
#include "mcp/json_rpc.h"

namespace hutch::mcp {

// The protocol versions served, newest first.
inline constexpr std::string_view kLatestVersion = "2025-11-25";
std::span<const std::string_view> supportedVersions();
bool isSupportedVersion(std::string_view version);
// The version answered to a client asking for `requested`.
std::string negotiateVersion(std::string_view requested);
// JSON-RPC batches: received in 2025-03-26 (and 2024-11-05, plain JSON-RPC 2.0); removed from
// the protocol in 2025-06-18.
bool allowsBatches(std::string_view version);

// What a tool call answers. A failure is still a result (isError), with a message that says
// what to do; `structured` is the JSON the text content also carries.
struct ToolResult {
  nlohmann::json structured;
  bool is_error = false;
  std::string note;  // prepended to the text content when set (truncation, timeouts)
};

// The tools a server offers; BoxTools (box_tools.h) is hutch's.
class ToolSet {
 public:
  virtual ~ToolSet() = default;
  // The Tool objects of tools/list, in a fixed order.
  virtual const nlohmann::json& definitions() const = 0;
  virtual bool has(std::string_view name) const = 0;
  virtual boost::asio::awaitable<ToolResult> call(std::string name, nlohmann::json arguments,
                                                  api::Principal caller) = 0;
};

struct Session {
  std::string version;       // negotiated; empty until initialize
  bool initialized = false;  // notifications/initialized arrived
  nlohmann::json client_info;
};

struct ServerInfo {
  std::string name = "hutch";
  std::string version;
  std::string instructions;
};

class Server {
 public:
  Server(ToolSet& tools, ServerInfo info) : tools_(tools), info_(std::move(info)) {}

  // One request: its response (a result or a JSON-RPC error). initialize sets the session's
  // version; every other method but ping needs one.
  boost::asio::awaitable<json> request(Session& session, Request request, api::Principal caller);
  // One notification (nothing is answered).
  static void notification(Session& session, const Notification& notification);

 private:
  json initialize(Session& session, const Request& request) const;
  json toolsList(const Request& request);
  boost::asio::awaitable<json> toolsCall(const Session& session, const Request& request,
                                         const api::Principal& caller);

  ToolSet& tools_;
  ServerInfo info_;
};

// A CallToolResult for `version`: the text content (the note, then the JSON), isError, and
// structuredContent from 2025-06-18 on.
json callToolResult(const ToolResult& result, std::string_view version);

}  // namespace hutch::mcp

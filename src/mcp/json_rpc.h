// JSON-RPC 2.0 as MCP uses it (docs/mcp.md): one message classified as a request, a
// notification or a response, and the responses a server sends. Pure: no I/O, unit-tested.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

namespace hutch::mcp {

using nlohmann::json;

// JSON-RPC's own error codes (https://www.jsonrpc.org/specification#error_object).
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

struct Request {
  json id;  // a string or an integer (MCP forbids null)
  std::string method;
  json params;  // an object, or null when absent
};

struct Notification {
  std::string method;
  json params;
};

// A client's answer to a request of ours (we send none, so it is accepted and dropped).
struct Response {
  json id;
};

// A message that is not one of the above: the error response it gets (its "id" is the
// message's when it could be read, else null).
struct Invalid {
  json error_response;
};

using Message = std::variant<Request, Notification, Response, Invalid>;

// Classifies one parsed JSON value (an element of a batch, or a whole body).
Message classify(const json& value);

// {"jsonrpc": "2.0", "id": ID, "result": RESULT}
json resultResponse(const json& id, json result);
// {"jsonrpc": "2.0", "id": ID, "error": {"code", "message", "data"?}}
json errorResponse(const json& id, int code, std::string_view message, json data = nullptr);

// A body's JSON, or the parse error response to send for it.
std::variant<json, Invalid> parseBody(std::string_view text);

}  // namespace hutch::mcp

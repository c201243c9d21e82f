#include "mcp/json_rpc.h"

#include <fmt/format.h>

namespace hutch::mcp {

namespace {

bool validId(const json& id) {
  return id.is_string() || id.is_number_integer();
}

Invalid invalid(const json& id, std::string_view message) {
  return Invalid{errorResponse(id, kInvalidRequest, message)};
}

}  // namespace

json resultResponse(const json& id, json result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json errorResponse(const json& id, int code, std::string_view message, json data) {
  json error{{"code", code}, {"message", message}};
  if (!data.is_null()) error["data"] = std::move(data);
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

std::variant<json, Invalid> parseBody(std::string_view text) {
  json value = json::parse(text, nullptr, false);
  if (value.is_discarded()) {
    return Invalid{errorResponse(nullptr, kParseError, "Parse error: the body is not valid JSON")};
  }
  return value;
}

Message classify(const json& value) {
  if (!value.is_object()) {
    return invalid(nullptr, fmt::format("Invalid Request: a JSON-RPC message is an object, not {}",
                                        value.type_name()));
  }
  // The id, when it is one we can answer to (even if the rest is wrong).
  json id = nullptr;
  auto id_it = value.find("id");
  if (id_it != value.end() && validId(*id_it)) id = *id_it;
  auto version = value.find("jsonrpc");
  if (version == value.end() || *version != "2.0") {
    return invalid(id, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
  }
  auto method = value.find("method");
  if (method == value.end()) {
    // A response to a request of ours: an id and either result or error.
    if (id_it != value.end() && (value.contains("result") || value.contains("error"))) {
      return Response{id_it->is_null() ? json(nullptr) : *id_it};
    }
    return invalid(id,
                   "Invalid Request: a message needs \"method\" (a request or notification) "
                   "or \"result\"/\"error\" (a response)");
  }
  if (!method->is_string() || method->get_ref<const std::string&>().empty()) {
    return invalid(id, "Invalid Request: \"method\" must be a non-empty string");
  }
  json params = nullptr;
  if (auto p = value.find("params"); p != value.end()) {
    // JSON-RPC allows arrays; MCP's params are always objects.
    if (!p->is_object()) {
      return Invalid{
          errorResponse(id, kInvalidParams, "Invalid params: \"params\" must be an object")};
    }
    params = *p;
  }
  if (id_it == value.end()) {
    return Notification{method->get<std::string>(), std::move(params)};
  }
  if (!validId(*id_it)) {
    return invalid(nullptr,
                   "Invalid Request: \"id\" must be a string or an integer (MCP forbids null)");
  }
  return Request{*id_it, method->get<std::string>(), std::move(params)};
}

}  // namespace hutch::mcp

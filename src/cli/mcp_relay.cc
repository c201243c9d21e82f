#include "cli/mcp_relay.h"

#include <fmt/format.h>

namespace hutch::cli {

namespace {

// JSON-RPC's range for implementation-defined server errors: the relay's own failures.
constexpr int kRelayError = -32000;

std::string trimmed(const std::string& text) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return {};
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(start, end - start + 1);
}

bool validId(const json& id) {
  return id.is_string() || id.is_number_integer();
}

// What an error answer says: a JSON-RPC error's message, or hutch's {"error": {"message"}}.
std::string errorText(const RawResponse& res) {
  json body = json::parse(res.body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const json& e = body["error"];
    if (e.contains("message") && e["message"].is_string()) return e["message"];
  }
  return fmt::format("hutchd answered HTTP {}", res.status);
}

}  // namespace

bool McpRelay::initialized() const {
  std::lock_guard lock(mutex_);
  return !session_id_.empty();
}

std::map<std::string, std::string> McpRelay::sessionHeaders() const {
  std::lock_guard lock(mutex_);
  if (session_id_.empty()) return {};
  return {{"Mcp-Session-Id", session_id_}, {"MCP-Protocol-Version", version_}};
}

McpRelay::Attempt McpRelay::send(const std::string& body) {
  std::map<std::string, std::string> headers = sessionHeaders();
  std::string used = headers.count("Mcp-Session-Id") ? headers["Mcp-Session-Id"] : std::string();
  headers["Content-Type"] = "application/json";
  headers["Accept"] = "application/json, text/event-stream";
  return Attempt{post_(headers, body), std::move(used)};
}

Result<> McpRelay::reinitialize(const std::string& stale) {
  std::lock_guard serial(reinit_mutex_);
  std::string init;
  {
    std::lock_guard lock(mutex_);
    if (session_id_ != stale) return ok();  // another message made a new session meanwhile
    init = initialize_line_;
    session_id_.clear();
  }
  const std::map<std::string, std::string> headers = {
      {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}};
  HUTCH_TRY(RawResponse res, post_(headers, init));
  auto id = res.headers.find("mcp-session-id");
  if (res.status != 200 || id == res.headers.end()) {
    return fail(Errc::kUnavailable, "hutchd refused a new MCP session: " + errorText(res));
  }
  {
    std::lock_guard lock(mutex_);
    session_id_ = id->second;
  }
  auto initialized = send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  if (!initialized.response) return fail(initialized.response.error());
  log_("hutch mcp: hutchd no longer knew the MCP session (was it restarted?); started a new one");
  return ok();
}

void McpRelay::answerFailure(const json& id, const std::string& message) {
  json response{
      {"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", kRelayError}, {"message", message}}}};
  write_(response.dump(-1, ' ', false, json::error_handler_t::replace));
}

void McpRelay::handleLine(const std::string& raw) {
  const std::string line = trimmed(raw);
  if (line.empty()) return;
  const json message = json::parse(line, nullptr, false);
  const bool object = message.is_object();
  const json id =
      object && message.contains("id") && validId(message["id"]) ? message["id"] : json(nullptr);
  const bool request = object && message.contains("method") && !id.is_null();
  const bool initialize = request && message["method"] == "initialize";

  Attempt attempt = send(line);
  if (attempt.response && attempt.response->status == 404 && !attempt.session_used.empty() &&
      !initialize) {
    if (auto renewed = reinitialize(attempt.session_used); !renewed) {
      log_("hutch mcp: " + renewed.error().describe());
    } else {
      attempt = send(line);
    }
  }
  if (!attempt.response) {
    const std::string why = attempt.response.error().describe();
    log_("hutch mcp: " + why);
    if (request) answerFailure(id, why);
    return;
  }
  const RawResponse& res = *attempt.response;
  if (res.status == 202) return;
  if (res.status == 200) {
    if (initialize) {
      auto session = res.headers.find("mcp-session-id");
      json body = json::parse(res.body, nullptr, false);
      if (session != res.headers.end() && body.is_object() && body.contains("result")) {
        std::lock_guard lock(mutex_);
        session_id_ = session->second;
        version_ = body["result"].value("protocolVersion", "");
        initialize_line_ = line;
      }
    }
    write_(trimmed(res.body));
    return;
  }
  // Refused before the protocol ran (a missing session, a bad key, an unreachable endpoint):
  // a request still gets its answer, with its own id.
  const std::string why = errorText(res);
  log_(fmt::format("hutch mcp: HTTP {}: {}", res.status, why));
  if (request) {
    answerFailure(id, why);
  } else if (!object) {
    // Not a message at all (bad JSON, an empty batch): hutchd's JSON-RPC error, as it came.
    json body = json::parse(res.body, nullptr, false);
    if (body.is_object() && body.contains("jsonrpc")) write_(trimmed(res.body));
  }
}

}  // namespace hutch::cli

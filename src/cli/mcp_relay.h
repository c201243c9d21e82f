// `hutch mcp` (docs/mcp.md): MCP's stdio transport relayed to hutchd's MCP endpoint, so the
// protocol lives once, in hutchd. Each line read from stdin is one JSON-RPC message (or batch),
// POSTed to /mcp with the session's headers; a 200 answer's body is written to stdout as one
// line, a 202 writes nothing. The session is the relay's: it keeps the Mcp-Session-Id that
// initialize answered and, when hutchd no longer knows it (404: hutchd restarted), initializes
// a new one with the client's own initialize and sends the message again, so an MCP client
// outlives a hutchd restart. A request that fails on the way (hutchd unreachable, a refused key)
// is answered with a JSON-RPC error carrying its id, so the client never waits for nothing.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "base/result.h"
#include "cli/api_client.h"

namespace hutch::cli {

class McpRelay {
 public:
  // POSTs a body to /mcp with these headers.
  using Post = std::function<Result<RawResponse>(const std::map<std::string, std::string>& headers,
                                                 const std::string& body)>;
  // Writes one line to stdout (the caller serializes and flushes).
  using WriteLine = std::function<void(const std::string& line)>;
  // Logs to stderr.
  using Log = std::function<void(const std::string& text)>;

  McpRelay(Post post, WriteLine write, Log log)
      : post_(std::move(post)), write_(std::move(write)), log_(std::move(log)) {}

  // One line from stdin. Safe to call from several threads once a session exists.
  void handleLine(const std::string& line);
  // Whether the session was initialized (later lines may then be relayed concurrently).
  bool initialized() const;
  // The headers that end the session (DELETE /mcp), empty without one.
  std::map<std::string, std::string> sessionHeaders() const;

 private:
  struct Attempt {
    Result<RawResponse> response;
    std::string session_used;
  };
  Attempt send(const std::string& body);
  // A new session from the saved initialize, unless another thread made one already
  // (`stale` is the session that failed).
  Result<> reinitialize(const std::string& stale);
  void answerFailure(const nlohmann::json& id, const std::string& message);

  Post post_;
  WriteLine write_;
  Log log_;
  mutable std::mutex mutex_;
  std::string session_id_;
  std::string version_;
  std::string initialize_line_;  // the client's initialize, for a new session after a 404
  std::mutex reinit_mutex_;
};

}  // namespace hutch::cli

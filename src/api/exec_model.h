// The JSON forms of exec in the API (docs/api.md "Exec without a custom protocol"): the request
// of POST /v1/boxes/{box}/exec without an upgrade, its result, and the first message of the
// WebSocket exec. Strict: unknown fields and wrong types are kInvalidArgument naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "proto/messages.h"

namespace hutch::api {

inline constexpr uint64_t kDefaultMaxOutput = uint64_t{1} << 20;
inline constexpr uint64_t kMaxMaxOutput = uint64_t{64} << 20;

struct ExecRun {
  proto::ExecRequest exec;  // argv, env, cwd, user (pipe_stdin set when stdin is given)
  std::optional<std::string> stdin_data;
  uint64_t timeout_ms = 0;                        // 0: none
  uint64_t max_output_bytes = kDefaultMaxOutput;  // per stream
};
Result<ExecRun> parseExecRun(std::string_view body);

// An exec request and the host's time limit for it ("timeout_ms"; 0: none).
struct ExecStart {
  proto::ExecRequest exec;
  uint64_t timeout_ms = 0;
};
// The first message of /v1/boxes/{box}/exec/ws: an upgrade-form ExecRequest ("env" may also be
// an object) without "detach".
Result<ExecStart> parseExecStart(std::string_view message);
// A text message of the exec WebSocket after the first one: a control message. Anything else
// (not JSON, no or an unknown "type", fields of the wrong type, a signal outside 1..64) is
// nullopt: the WebSocket ignores it. Rows and columns are clamped to 10000.
struct WsControl {
  enum class Kind { kStdinEof, kResize, kSignal };
  Kind kind = Kind::kStdinEof;
  uint16_t rows = 0;  // kResize
  uint16_t cols = 0;
  int signal = 0;  // kSignal
  bool operator==(const WsControl&) const = default;
};
std::optional<WsControl> parseWsControl(std::string_view message);
// The body of the upgraded exec and of POST /processes: the agent's ExecRequest, strict about
// fields (the agent's own decoder ignores unknown ones, for newer hosts), and "timeout_ms"
// (not with "detach").
Result<ExecStart> parseExecRequest(std::string_view body, std::string_view what);

// "env": {"K": "V"} or ["K=V"], into "K=V" entries (checked as the agent will).
Result<> readEnv(const nlohmann::json& j, std::vector<std::string>& out, std::string_view what);

struct ExecOutcome {
  std::string stdout_data;
  std::string stderr_data;
  proto::ExitStatus status;
  uint64_t duration_ms = 0;
  bool truncated = false;
  bool timed_out = false;
  int pid = 0;
  std::optional<Error> error;  // the command could not be started (status is then 127 or 126)
};
nlohmann::json toJson(const ExecOutcome& outcome);

}  // namespace hutch::api

// The E2B façade's value mapping (docs/e2b.md): the Connect protocol's framing and error codes,
// envd's messages in proto3 JSON, the control plane's bodies, and the per-sandbox access
// tokens. Pure functions, no I/O: the handlers (handlers.cc) use them, unit tests cover them.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "box/box.h"
#include "proto/files.h"

namespace hutch::e2b {

using json = nlohmann::json;

// The envd version hutch's façade reports: the SDKs switch features on it (docs/e2b.md).
// 0.5.7: stdin control, closeStdin, octet-stream uploads; not file metadata (0.6.2) nor entry
// info in watch events (0.6.3).
inline constexpr std::string_view kEnvdVersion = "0.5.7";
// The port E2B's SDKs name for envd in E2b-Sandbox-Port.
inline constexpr int kEnvdPort = 49983;
// The user commands and file operations run as unless the caller names one.
inline constexpr std::string_view kDefaultUser = "user";

// ---- Connect protocol (connectrpc.com/docs/protocol.md), JSON codec ----

inline constexpr uint8_t kEndStreamFlag = 0x02;
// One envelope: a flag byte, the length (4 bytes, big-endian), the message.
std::string envelope(std::string_view message, uint8_t flags = 0);
// The one message of a streaming request's body (exactly one uncompressed envelope).
Result<std::string> singleEnvelope(std::string_view body);
// Connect's code name for an error ("not_found", "already_exists", ...).
std::string_view connectCode(Errc code);
// The HTTP status a unary Connect error is answered with.
int connectStatus(std::string_view code);
// {"code": "not_found", "message": "..."}: a unary error's body, and (under "error") the
// end-stream message of a stream that failed.
json connectError(const Error& error);

// ---- control plane (E2B's openapi.yml) ----

// E2B's error body: {"code": <HTTP status>, "message": "..."}.
json apiError(const Error& error, int status);

// What a sandbox asks of the network: network.allowOut and network.denyOut, and
// allow_internet_access, of create (NewSandbox) and of PUT /sandboxes/{id}/network.
struct NetworkRequest {
  std::vector<std::string> allow_out;  // the egress allow-list
  std::vector<std::string> deny_out;
  std::optional<bool> allow_internet_access;  // absent: E2B's default, on
};

struct NewSandbox {
  std::string template_id = "base";
  int64_t timeout_s = 15;  // E2B's default lifetime
  box::BoxMetadata metadata;
  box::BoxEnv env;
  bool auto_pause = false;  // at the end of the lifetime: stop (kept) instead of remove
  NetworkRequest network;
};
// Parses POST /sandboxes (and /v2/sandboxes). Unknown fields are ignored (E2B's SDKs send
// fields hutch has no use for, like "secure"); wrong types are kInvalidArgument.
Result<NewSandbox> parseNewSandbox(std::string_view body);
// Parses PUT /sandboxes/{id}/network (SandboxNetworkUpdateConfig).
Result<NetworkRequest> parseNetworkUpdate(std::string_view body);
// {"timeout": seconds} of /sandboxes/{id}/timeout and /connect; nullopt when absent.
Result<std::optional<int64_t>> parseTimeoutBody(std::string_view body, bool required);

// The template a sandbox of E2B template `id` is made from: an entry of the map (hutchd
// --e2b-template NAME=TEMPLATE), else the same name.
std::string mapTemplate(const std::map<std::string, std::string>& map, const std::string& id);

// RFC 3339 in UTC with seconds ("2026-12-02T05:00:00Z").
std::string rfc3339(int64_t unix_seconds);
std::string rfc3339Nanos(int64_t unix_nanos);  // with nanoseconds when they are not 0

// "running" or "paused" (a stopped box), as E2B's SandboxState.
std::string sandboxState(const box::Box& b);
// The Sandbox of a create or connect answer.
json sandboxJson(const box::Box& b, const std::string& template_id, const std::string& token);
// SandboxDetail (GET /sandboxes/{id}) and ListedSandbox (list).
json sandboxDetailJson(const box::Box& b, const std::string& template_id, uint64_t disk_mib);
// The E2B template id a box was made from: the metadata hutch keeps for it, else its template.
std::string templateIdOf(const box::Box& b);
// Metadata the façade keeps with a box for itself (never shown to E2B's clients, whose
// metadata is everything else): keys starting with kInternalMetadataPrefix.
inline constexpr std::string_view kInternalMetadataPrefix = "hutch.e2b.";
inline constexpr std::string_view kTemplateMetadataKey = "hutch.e2b.template";
// When the sandbox was created, in unix nanoseconds (Box::created_at has seconds): the order
// of Sandbox.list.
inline constexpr std::string_view kCreatedMetadataKey = "hutch.e2b.created";
// "true" for a sandbox created with autoPause: its lifetime ends in a pause, every time.
inline constexpr std::string_view kAutoPauseMetadataKey = "hutch.e2b.autoPause";
// The default user and working directory of its commands and file operations (E2B's envd
// defaultUser and defaultWorkdir), from the last USER and WORKDIR of the E2B build that made
// its template; absent: "user", and the user's home.
inline constexpr std::string_view kUserMetadataKey = "hutch.e2b.user";
inline constexpr std::string_view kWorkdirMetadataKey = "hutch.e2b.workdir";
// Those of a box: kDefaultUser and "" when it has none.
std::string defaultUserOf(const box::Box& b);
std::string defaultWorkdirOf(const box::Box& b);

// ---- envd ----

// The per-sandbox access token: HMAC-SHA256 of the box id under hutchd's secret, hex.
std::string accessToken(std::string_view secret, std::string_view box_id);
// Constant-time comparison.
bool sameToken(std::string_view a, std::string_view b);
// A signed /files URL's signature: "v1_" + base64(sha256("path:op:user:token[:exp]")) without
// '=' (E2B's SDK, sandbox/signature.ts).
std::string fileSignature(std::string_view path, std::string_view operation, std::string_view user,
                          std::string_view token, std::optional<int64_t> expiration);
// A signed URL's query (path, signature, signature_expiration, username) against a sandbox's
// token, for `operation` ("read" or "write") at unix time `now`. An expired signature is
// kExpired only when it is otherwise right, as envd checks.
enum class SignatureCheck { kValid, kMissing, kInvalid, kExpired };
SignatureCheck checkFileSignature(const std::map<std::string, std::string, std::less<>>& query,
                                  std::string_view operation, std::string_view token, int64_t now);
// What envd answers (401) for a signature that is not kValid: its words, which E2B's SDKs
// and their users compare ("signature is already expired").
std::string_view signatureProblem(SignatureCheck check);

// The user of "Authorization: Basic base64(user:)"; `fallback` (the sandbox's default user)
// when there is none.
Result<std::string> userFromAuthorization(std::string_view header,
                                          std::string_view fallback = kDefaultUser);

// Whether the last component of `path` is one of the temporaries hutch-agent writes a file
// through (".NAME.hutch-" and 16 hex digits, renamed over NAME when complete): watchers are not
// shown them, as envd, which writes in place, has none.
bool isWriteTemporary(std::string_view path);

// EntryInfo in proto3 JSON, as envd fills it: `mode` is the permission bits only (Go's
// FileMode.Perm(): 0755 for a directory, no ModeDir bit), a symlink's `symlinkTarget` the
// absolute path it names (symlinkTargetPath).
json entryJson(const proto::FileInfo& info);

// `path` made clean (no "." or ".." components, no "//", no trailing slash), absolute paths
// only; as Go's filepath.Clean.
std::string cleanPath(std::string_view path);
// The absolute path a symlink at `link` (absolute) whose text is `target` names: a relative
// target is taken from the link's directory. envd resolves it further through other symlinks;
// hutch does not (the link's own text, made absolute).
std::string symlinkTargetPath(std::string_view link, std::string_view target);
// A path as envd resolves it for a user (permissions.ExpandAndResolve): "~" and "~/x" are in
// `home`, a relative path is taken from `home`, an absolute one is kept as it is.
std::string resolveForUser(std::string_view path, std::string_view home);

// A user of the box's /etc/passwd (its text), by name or uid; nullopt when there is none.
struct PasswdEntry {
  std::string name;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string home;
};
std::optional<PasswdEntry> passwdEntry(std::string_view passwd, std::string_view user);

// A process's request (process.ProcessConfig).
struct ProcessConfig {
  std::string cmd;
  std::vector<std::string> args;
  std::map<std::string, std::string> envs;
  std::optional<std::string> cwd;
};
json toJson(const ProcessConfig& config);
Result<ProcessConfig> parseProcessConfig(const json& j);

struct StartRequest {
  ProcessConfig process;
  bool tty = false;
  uint16_t rows = 0;
  uint16_t cols = 0;
  std::optional<std::string> tag;
  bool stdin = false;
};
Result<StartRequest> parseStartRequest(const json& j);

// ProcessSelector: {"pid": N} or {"tag": "..."}.
struct Selector {
  std::optional<uint32_t> pid;
  std::optional<std::string> tag;
};
Result<Selector> parseSelector(const json& message);  // message["process"]

// SIGNAL_SIGKILL -> 9, SIGNAL_SIGTERM -> 15 (also accepts the numbers).
Result<int> parseSignal(const json& value);

// A JSON message's body: an object, else kInvalidArgument.
Result<json> parseMessage(std::string_view body);

// The "status" text of an EndEvent, as Go's ProcessState.String() says it.
std::string exitStatusText(const proto::ExitStatus& status);

}  // namespace hutch::e2b

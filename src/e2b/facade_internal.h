// The E2B façade's parts, shared by its files: facade.cc (planes, routes, access tokens, the
// helpers below), control_plane.cc (E2B's /sandboxes API), processes.cc and filesystem.cc
// (envd's RPCs, /files and /health). Not for use outside src/e2b.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/http_server.h"
#include "base/result.h"
#include "box/box_service.h"
#include "e2b/facade.h"
#include "e2b/model.h"

namespace hutch::e2b {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Reply = std::optional<api::Response>;

const std::string& boxOf(const api::RequestContext& ctx);  // the sandbox's box id
api::Response jsonReply(http::status status, const json& body);
api::Response noContent();

// ---- errors ----

bool isRpcPath(std::string_view path);  // /process.Process/..., /filesystem.Filesystem/...
// /sandboxes..., /v2/sandboxes..., /snapshots, /templates/...
bool isControlPath(std::string_view path);
// envd's plane: a sandbox that is gone or not running is 502 (what E2B's proxy answers, and
// what the SDKs read as "not running"); RPCs get Connect's error body, the rest envd's.
api::Response renderEnvd(const Error& error, std::string_view path);
api::Response renderControl(const Error& error, std::string_view path);
api::Response controlError(const Error& error);
api::Response rpcError(const Error& error);
api::Response envdError(const Error& error);
// A box that cannot serve envd requests now is "not running" to the SDK.
Error notRunning(const Error& error, const std::string& box);

// ---- requests ----

Result<json> streamRequest(const api::RequestContext& ctx);  // a streaming request's message
// The user a request names (Authorization: Basic), else the sandbox's default (defaultUserOf).
Result<std::string> userOf(const api::RequestContext& ctx, box::BoxService& service);
std::chrono::milliseconds keepaliveInterval(const api::RequestContext& ctx);
std::optional<std::chrono::milliseconds> connectTimeout(const api::RequestContext& ctx);

// A server stream's response: 200, application/connect+json, one chunk per envelope.
class EnvelopeStream {
 public:
  explicit EnvelopeStream(api::RequestContext& ctx) : ctx_(ctx), writer_(*ctx.connection) {}
  asio::awaitable<bool> start();
  asio::awaitable<bool> send(const json& message);
  asio::awaitable<bool> sendText(std::string_view message);
  // The end-stream message ({} or {"error": ...}) and the last chunk; the connection may carry
  // the next request.
  asio::awaitable<void> finish(const std::optional<Error>& error);

 private:
  api::RequestContext& ctx_;
  api::ChunkedWriter writer_;
};

// ---- state ----

struct Process;  // processes.cc
struct Watcher;  // filesystem.cc

struct Facade::State {
  asio::any_io_executor executor;
  // box id -> pid -> process
  std::map<std::string, std::map<uint32_t, std::shared_ptr<Process>>> processes;
  // box id -> watcher id -> watcher (CreateWatcher / GetWatcherEvents)
  std::map<std::string, std::map<std::string, std::shared_ptr<Watcher>>> watchers;
};
using State = Facade::State;

// ---- handlers ----

using Ctx = api::RequestContext;
using Service = box::BoxService;
using Shared = std::shared_ptr<State>;

// control_plane.cc
// `builds` (null without E2B's template builder) resolves the templates it made.
asio::awaitable<Reply> createSandbox(Service& s, const FacadeOptions& o,
                                     const TemplateBuilds* builds, Ctx& ctx);
asio::awaitable<Reply> getSandbox(Service& s, Ctx& ctx);
asio::awaitable<Reply> listSandboxes(Service& s, Ctx& ctx);
asio::awaitable<Reply> killSandbox(Service& s, Ctx& ctx);
asio::awaitable<Reply> setSandboxTimeout(Service& s, Ctx& ctx);
asio::awaitable<Reply> connectSandbox(Service& s, const FacadeOptions& o, Ctx& ctx);
asio::awaitable<Reply> pauseSandbox(Service& s, Ctx& ctx);
asio::awaitable<Reply> sandboxMetrics(Service& s, Ctx& ctx);
asio::awaitable<Reply> updateSandboxNetwork(Service& s, const FacadeOptions& o, Ctx& ctx);
asio::awaitable<Reply> forkSandbox(Service& s, const FacadeOptions& o, Ctx& ctx);
asio::awaitable<Reply> createSnapshot(Service& s, Ctx& ctx);
asio::awaitable<Reply> listSnapshots(Service& s, Ctx& ctx);
asio::awaitable<Reply> deleteSnapshot(Service& s, Ctx& ctx);

// processes.cc
asio::awaitable<Reply> processStart(Service& s, Shared st, Ctx& ctx);
asio::awaitable<Reply> processConnect(Shared st, Ctx& ctx);
asio::awaitable<Reply> processList(Shared st, Ctx& ctx);
asio::awaitable<Reply> processSendInput(Shared st, Ctx& ctx);
asio::awaitable<Reply> processCloseStdin(Shared st, Ctx& ctx);
asio::awaitable<Reply> processSendSignal(Shared st, Ctx& ctx);
asio::awaitable<Reply> processUpdate(Shared st, Ctx& ctx);

// filesystem.cc
asio::awaitable<Reply> fsStat(Service& s, Ctx& ctx);
asio::awaitable<Reply> fsListDir(Service& s, Ctx& ctx);
asio::awaitable<Reply> fsMakeDir(Service& s, Ctx& ctx);
asio::awaitable<Reply> fsMove(Service& s, Ctx& ctx);
asio::awaitable<Reply> fsRemove(Service& s, Ctx& ctx);
asio::awaitable<Reply> fsWatchDir(Service& s, Ctx& ctx);
asio::awaitable<Reply> fsCreateWatcher(Service& s, Shared st, Ctx& ctx);
asio::awaitable<Reply> fsGetWatcherEvents(Shared st, Ctx& ctx);
asio::awaitable<Reply> fsRemoveWatcher(Shared st, Ctx& ctx);
asio::awaitable<Reply> filesGet(Service& s, Ctx& ctx);
asio::awaitable<Reply> filesPost(Service& s, Ctx& ctx);
asio::awaitable<Reply> health(Service& s, Ctx& ctx);

}  // namespace hutch::e2b

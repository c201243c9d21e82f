// The API's routes (docs/api.md): thin handlers that decode, call BoxService and map errors.
// Every route runs behind the server's chain (http_server.h): the caller is authenticated, its
// access checked and {box} resolved to a box it may see before a handler runs.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "api/auth.h"
#include "api/exec_model.h"
#include "api/http_server.h"
#include "api/secret_service.h"
#include "box/box_service.h"
#include "box/port_forwards.h"
#include "box/template_builder.h"
#include "box/template_service.h"
#include "guest/file_reader.h"
#include "observe/audit_log.h"
#include "observe/event_bus.h"
#include "observe/metrics.h"
#include "proto/messages.h"
#include "vmm/accel.h"

namespace hutch::api {

struct DaemonInfo {
  std::string version;
  vmm::AccelDecision accel;
  std::string backend;
  std::string state_dir;
  std::string tls_fingerprint;         // of the TLS listener's certificate; empty without one
  const HttpServer* server = nullptr;  // for the listeners it serves
};

// Registers every route on `router`. The service and info must outlive the router.
void registerRoutes(ApiRouter& router, box::BoxService& service, box::TemplateService& templates,
                    const DaemonInfo& info);

// POST /v1/builds: Dockerfile builds (build_handlers.cc). The builder must outlive the router.
void registerBuildRoutes(ApiRouter& router, box::TemplateBuilder& builder);

// exec: upgraded, JSON, WebSocket (exec_handlers.cc).
void registerExecRoutes(ApiRouter& router, box::BoxService& service);

// Runs a command in a running box to completion, as POST /v1/boxes/{box}/exec without an upgrade
// does (and the MCP server's run_command): `box` is a resolved box id. A command that cannot
// start is the outcome's error (exit 127 or 126), not this call's; run.timeout_ms kills it.
asio::awaitable<Result<ExecOutcome>> runToCompletion(box::BoxService& service,
                                                     const std::string& box,
                                                     const observe::Actor& actor, ExecRun run);

// Files without exec: stat, list, mkdir, move, remove, raw reads and writes, tar archives
// (file_handlers.cc).
void registerFileRoutes(ApiRouter& router, box::BoxService& service);

// What changed on a box's disk: hutch diff, --patch and export (diff_handlers.cc).
void registerDiffRoutes(ApiRouter& router, box::BoxService& service);

// Published ports, detached processes and services (box_io_handlers.cc).
void registerBoxIoRoutes(ApiRouter& router, box::BoxService& service, box::PortForwards& ports);

// A box's egress policy and policy log (network_handlers.cc).
void registerNetworkRoutes(ApiRouter& router, box::BoxService& service);

// The caller's host secrets (secret_handlers.cc). The service must outlive the router.
void registerSecretRoutes(ApiRouter& router, SecretService& secrets);

// Events, the audit log and metrics (observe_handlers.cc, docs/observability.md). `audit` may be
// null (hutchd --no-audit).
void registerObserveRoutes(ApiRouter& router, box::BoxService& service, observe::EventBus& bus,
                           observe::AuditLog* audit, observe::Metrics& metrics);

// API keys, admin only (key_handlers.cc). `revoked` is called with the id of a removed key:
// its open connections are closed.
void registerKeyRoutes(ApiRouter& router, KeyService& keys,
                       const std::function<void(const std::string&)>& revoked);

// The web dashboard's static files at /ui/ (ui_handlers.cc, docs/dashboard.md), from `dir` (the
// output of web/dashboard/build.sh): GET and HEAD; /ui redirects to /ui/, which is index.html.
// A missing `dir` is a 404 saying how to build it.
void registerUiRoutes(ApiRouter& router, const std::filesystem::path& dir);
// Serves `router` (registerUiRoutes) on the TCP listeners without an API key: the files carry
// no data, and every API call the page makes needs a key.
Plane uiPlane(const ApiRouter& router);

// The file below the dashboard's directory that a request path names: "/ui/" is "index.html",
// "/ui/assets/a.js" is "assets/a.js" (segments percent-decoded). kInvalidArgument for empty,
// "." or ".." segments and for '/', a backslash or NUL inside one; kNotFound for paths outside
// /ui/, hidden names (".x"), directories ("/ui/assets/") and paths deeper than the routes.
Result<std::string> uiFilePath(std::string_view request_path);
// The Content-Type of a dashboard file, by its extension.
std::string_view uiContentType(std::string_view file);

struct UiFile {
  std::string content;
  int64_t mtime_ns = 0;
};
// Reads `relative` (from uiFilePath) below `dir` without leaving it (openat2 RESOLVE_BENEATH):
// a symlink may lead elsewhere inside `dir`, never out. kNotFound for a missing file, one that
// leads out, anything but a regular file, and a missing `dir` (saying to run
// web/dashboard/build.sh).
Result<UiFile> readUiFile(const std::filesystem::path& dir, const std::string& relative);

// Answers a file opened for reading: its header, then exactly the size it had when opened (the
// connection ends early if the read fails midway). For GET /v1/boxes/{box}/files and E2B's
// GET /files.
asio::awaitable<std::optional<Response>> sendFile(std::shared_ptr<guest::FileReader> reader,
                                                  RequestContext& ctx, std::string_view box);

// Resolves {box} to the id of a box the principal may see (a non-admin key: only its own; any
// other box is "No such box", exactly as one that does not exist).
ParamScoper boxScoper(box::BoxService& service);

// What a streamed template creation runs (a recipe build, an image pull, a Dockerfile build),
// reporting progress as text, a line at a time, from any thread.
using TemplateMaker =
    std::function<asio::awaitable<Result<nlohmann::json>>(box::TemplateService::Progress progress)>;
// Answers with application/x-ndjson: {"progress": LINE} as `make` reports, then {"template":
// ...} or the error object; a blank line after 5 s without one, which is how a client that left
// is noticed. The making goes on if the client leaves, but `cancel` (when given) is set then:
// an image pull or archive import stops.
asio::awaitable<std::optional<Response>> streamBuild(RequestContext& ctx, TemplateMaker make,
                                                     sys::CancelFlag cancel = nullptr);

// The owner filter of a principal's queries.
storage::OwnerFilter ownerFilter(const Principal& principal);

// The box's own environment (its env and its secrets' placeholders) under what the request
// sets itself.
void addBoxEnvironment(const box::Box& box, proto::ExecRequest& request);

}  // namespace hutch::api

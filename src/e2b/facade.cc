#include "e2b/facade.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <fstream>

#include "api/error_mapping.h"
#include "e2b/facade_internal.h"
#include "e2b/template_build.h"

namespace hutch::e2b {

using api::RequestContext;
using api::Response;
using asio::awaitable;

const std::string& boxOf(const RequestContext& ctx) {
  return ctx.params.find("box")->second;
}

Response jsonReply(http::status status, const json& body) {
  return api::jsonResponse(status, body);
}

Response noContent() {
  Response res{http::status::no_content, 11};
  return res;
}

// ---- rendering errors ----

bool isRpcPath(std::string_view path) {
  return path.starts_with("/process.Process/") || path.starts_with("/filesystem.Filesystem/");
}

bool isControlPath(std::string_view path) {
  for (std::string_view prefix : {"/sandboxes", "/v2/sandboxes", "/snapshots", "/templates",
                                  "/v2/templates", "/v3/templates"}) {
    if (path.starts_with(prefix) && (path.size() == prefix.size() || path[prefix.size()] == '/')) {
      return true;
    }
  }
  return false;
}

// envd's plane: a sandbox that is gone or not running is 502 (what E2B's proxy answers, and
// what the SDKs read as "not running"); RPCs get Connect's error body, the rest envd's.
Response renderEnvd(const Error& error, std::string_view path) {
  int status = error.code() == Errc::kUnavailable ? 502 : api::httpStatus(error.code());
  if (isRpcPath(path)) {
    json body = connectError(error);
    if (error.code() != Errc::kUnavailable) status = connectStatus(body["code"].get<std::string>());
    return jsonReply(static_cast<http::status>(status), body);
  }
  return jsonReply(static_cast<http::status>(status), apiError(error, status));
}

Response renderControl(const Error& error, std::string_view) {
  int status = api::httpStatus(error.code());
  Response res = jsonReply(static_cast<http::status>(status), apiError(error, status));
  if (error.code() == Errc::kUnauthenticated) res.set(http::field::www_authenticate, "ApiKey");
  return res;
}

Response controlError(const Error& error) {
  return renderControl(error, "");
}
Response rpcError(const Error& error) {
  return renderEnvd(error, "/process.Process/");
}
Response envdError(const Error& error) {
  return renderEnvd(error, "/files");
}

// A box that cannot serve envd requests now is "not running" to the SDK.
Error notRunning(const Error& error, const std::string& box) {
  if (error.code() == Errc::kNotFound || error.code() == Errc::kFailedPrecondition ||
      error.code() == Errc::kUnavailable) {
    return Error(Errc::kUnavailable,
                 fmt::format("The sandbox {} is not running ({}); connect to it to resume it", box,
                             error.message()));
  }
  return error;
}

// The one message of a streaming request (Content-Type application/connect+json).
Result<json> streamRequest(const RequestContext& ctx) {
  HUTCH_TRY(std::string message, singleEnvelope(ctx.request.body()));
  return parseMessage(message);
}

Result<std::string> userOf(const RequestContext& ctx, box::BoxService& service) {
  const std::string header(ctx.request[http::field::authorization]);
  auto b = service.get(boxOf(ctx));
  return userFromAuthorization(header, b ? defaultUserOf(*b) : std::string(kDefaultUser));
}

std::chrono::milliseconds keepaliveInterval(const RequestContext& ctx) {
  auto value = ctx.request["Keepalive-Ping-Interval"];
  int seconds = 90;
  if (!value.empty()) {
    try {
      seconds = std::clamp(std::stoi(std::string(value)), 1, 3600);
    } catch (const std::exception&) {
    }
  }
  return std::chrono::seconds(seconds);
}

std::optional<std::chrono::milliseconds> connectTimeout(const RequestContext& ctx) {
  auto value = ctx.request["Connect-Timeout-Ms"];
  if (value.empty()) return std::nullopt;
  try {
    long long ms = std::stoll(std::string(value));
    if (ms > 0) return std::chrono::milliseconds(ms);
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// ---- streams of Connect envelopes ----

awaitable<bool> EnvelopeStream::start() {
  co_return co_await writer_.start(http::status::ok, "application/connect+json");
}

awaitable<bool> EnvelopeStream::send(const json& message) {
  const std::string framed = envelope(message.dump());
  co_return co_await writer_.write(framed);
}

awaitable<bool> EnvelopeStream::sendText(std::string_view message) {
  const std::string framed = envelope(message);
  co_return co_await writer_.write(framed);
}

awaitable<void> EnvelopeStream::finish(const std::optional<Error>& error) {
  json end = json::object();
  if (error) end["error"] = connectError(*error);
  const std::string framed = envelope(end.dump(), kEndStreamFlag);
  bool ok = co_await writer_.write(framed);
  if (ok) ok = co_await writer_.finish();
  if (ok) ctx_.keep_alive = true;
}

namespace {

template <class F>
api::Route route(F f) {
  return api::Route(std::move(f));
}

}  // namespace

Result<std::string> loadSecret(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (secret.size() == 32) return secret;
    return fail(Errc::kInternal, fmt::format("{} is not a 32-byte secret; remove it to make a new "
                                             "one (every E2B access token changes)",
                                             path.string()));
  }
  std::string secret(32, '\0');
  if (getrandom(secret.data(), secret.size(), 0) != static_cast<ssize_t>(secret.size())) {
    return fail(Errc::kInternal, "getrandom failed");
  }
  const std::string tmp = path.string() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail(Errc::kInternal, fmt::format("Cannot create {}", tmp), errno);
  bool written = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  written = ::fsync(fd) == 0 && written;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(Errc::kInternal, fmt::format("Cannot write {}", path.string()), errno);
  }
  return secret;
}

Facade::Facade(asio::any_io_executor executor, box::BoxService& service, FacadeOptions options,
               box::TemplateBuilder* builder, box::TemplateService* templates)
    : service_(service), options_(std::move(options)), state_(std::make_shared<State>()) {
  state_->executor = std::move(executor);
  using http::verb;
  auto& s = service_;
  auto st = state_;
  const FacadeOptions& o = options_;
  // E2B's template builder: its routes before DELETE /templates/{id} of snapshots, which it
  // takes over (a template's id first, else a snapshot's).
  auto delete_snapshot = [&s] {
    return route([&s](RequestContext& ctx) { return deleteSnapshot(s, ctx); });
  };
  if (builder != nullptr && templates != nullptr && !options_.template_dir.empty()) {
    auto opened = TemplateBuilds::open(state_->executor, service_, *builder, *templates,
                                       options_.template_dir, options_);
    if (opened) {
      builds_ = std::move(*opened);
      builds_->addRoutes(control_, delete_snapshot());
    } else {
      spdlog::error("E2B template builds are off: {}", opened.error().describe());
    }
  }
  const TemplateBuilds* b = builds_.get();
  // Control plane: E2B's paths, with {box} for the sandbox id (hutch's scoper resolves it).
  for (const char* prefix : {"", "/v2"}) {
    const std::string p = prefix;
    control_.add(verb::post, p + "/sandboxes",
                 route([&s, &o, b](RequestContext& ctx) { return createSandbox(s, o, b, ctx); }));
    control_.add(verb::get, p + "/sandboxes",
                 route([&s](RequestContext& ctx) { return listSandboxes(s, ctx); }));
    control_.add(verb::post, p + "/sandboxes/{box}/connect",
                 route([&s, &o](RequestContext& ctx) { return connectSandbox(s, o, ctx); }));
  }
  control_.add(verb::get, "/sandboxes/{box}",
               route([&s](RequestContext& ctx) { return getSandbox(s, ctx); }));
  control_.add(verb::delete_, "/sandboxes/{box}",
               route([&s](RequestContext& ctx) { return killSandbox(s, ctx); }));
  control_.add(verb::post, "/sandboxes/{box}/timeout",
               route([&s](RequestContext& ctx) { return setSandboxTimeout(s, ctx); }));
  control_.add(verb::post, "/sandboxes/{box}/resume",
               route([&s, &o](RequestContext& ctx) { return connectSandbox(s, o, ctx); }));
  control_.add(verb::post, "/sandboxes/{box}/pause",
               route([&s](RequestContext& ctx) { return pauseSandbox(s, ctx); }));
  control_.add(verb::get, "/sandboxes/{box}/metrics",
               route([&s](RequestContext& ctx) { return sandboxMetrics(s, ctx); }));
  control_.add(verb::put, "/sandboxes/{box}/network",
               route([&s, &o](RequestContext& ctx) { return updateSandboxNetwork(s, o, ctx); }));
  control_.add(verb::post, "/sandboxes/{box}/fork",
               route([&s, &o](RequestContext& ctx) { return forkSandbox(s, o, ctx); }));
  control_.add(verb::post, "/sandboxes/{box}/snapshots",
               route([&s](RequestContext& ctx) { return createSnapshot(s, ctx); }));
  control_.add(verb::get, "/snapshots",
               route([&s](RequestContext& ctx) { return listSnapshots(s, ctx); }));
  if (!builds_) control_.add(verb::delete_, "/templates/{snapshot}", delete_snapshot());

  // envd: Connect RPCs, /files, /health. {box} comes from the plane's authentication.
  auto rpc = [this](const char* method, api::Route r, bool stream_body = false) {
    r.options.stream_body = stream_body;
    envd_.add(verb::post, method, std::move(r));
  };
  rpc("/process.Process/Start",
      route([&s, st](RequestContext& ctx) { return processStart(s, st, ctx); }));
  rpc("/process.Process/Connect",
      route([st](RequestContext& ctx) { return processConnect(st, ctx); }));
  rpc("/process.Process/List", route([st](RequestContext& ctx) { return processList(st, ctx); }));
  rpc("/process.Process/SendInput",
      route([st](RequestContext& ctx) { return processSendInput(st, ctx); }));
  rpc("/process.Process/CloseStdin",
      route([st](RequestContext& ctx) { return processCloseStdin(st, ctx); }));
  rpc("/process.Process/SendSignal",
      route([st](RequestContext& ctx) { return processSendSignal(st, ctx); }));
  rpc("/process.Process/Update",
      route([st](RequestContext& ctx) { return processUpdate(st, ctx); }));
  rpc("/filesystem.Filesystem/Stat", route([&s](RequestContext& ctx) { return fsStat(s, ctx); }));
  rpc("/filesystem.Filesystem/ListDir",
      route([&s](RequestContext& ctx) { return fsListDir(s, ctx); }));
  rpc("/filesystem.Filesystem/MakeDir",
      route([&s](RequestContext& ctx) { return fsMakeDir(s, ctx); }));
  rpc("/filesystem.Filesystem/Move", route([&s](RequestContext& ctx) { return fsMove(s, ctx); }));
  rpc("/filesystem.Filesystem/Remove",
      route([&s](RequestContext& ctx) { return fsRemove(s, ctx); }));
  rpc("/filesystem.Filesystem/WatchDir",
      route([&s](RequestContext& ctx) { return fsWatchDir(s, ctx); }));
  rpc("/filesystem.Filesystem/CreateWatcher",
      route([&s, st](RequestContext& ctx) { return fsCreateWatcher(s, st, ctx); }));
  rpc("/filesystem.Filesystem/GetWatcherEvents",
      route([st](RequestContext& ctx) { return fsGetWatcherEvents(st, ctx); }));
  rpc("/filesystem.Filesystem/RemoveWatcher",
      route([st](RequestContext& ctx) { return fsRemoveWatcher(st, ctx); }));
  envd_.add(verb::get, "/files", route([&s](RequestContext& ctx) { return filesGet(s, ctx); }));
  api::Route upload = route([&s](RequestContext& ctx) { return filesPost(s, ctx); });
  upload.options.stream_body = true;
  envd_.add(verb::post, "/files", std::move(upload));
  envd_.add(verb::get, "/health", route([&s](RequestContext& ctx) { return health(s, ctx); }));
}

Facade::~Facade() = default;

api::Plane Facade::controlPlane() {
  api::Plane plane;
  plane.name = "e2b";
  plane.claims = [](const http::request_header<>&, std::string_view path) {
    return isControlPath(path);
  };
  plane.router = &control_;
  plane.render = renderControl;
  return plane;
}

api::Plane Facade::uploadPlane() {
  if (builds_) return builds_->uploadPlane();
  api::Plane plane;
  plane.name = "e2b-upload";
  plane.claims = [](const http::request_header<>&, std::string_view) { return false; };
  plane.router = &envd_;
  plane.render = renderControl;
  return plane;
}

api::Plane Facade::envdPlane() {
  api::Plane plane;
  plane.name = "e2b-envd";
  plane.claims = [](const http::request_header<>& header, std::string_view path) {
    // The control plane's paths are its own whatever the headers: E2B's Python SDKs 2.7-2.26
    // send E2b-Sandbox-Id on POST /sandboxes/{id}/connect too.
    if (isControlPath(path)) return false;
    return !header["E2b-Sandbox-Id"].empty() || isRpcPath(path) || path == "/files" ||
           path == "/health";
  };
  plane.router = &envd_;
  plane.render = renderEnvd;
  box::BoxService& service = service_;
  std::string secret = options_.secret;
  plane.authenticate = [&service, secret](const http::request_header<>& header,
                                          const api::PathParams& query,
                                          api::PathParams& params) -> Result<api::Principal> {
    std::string id(header["E2b-Sandbox-Id"]);
    const std::string token(header["X-Access-Token"]);
    std::optional<box::Box> found;
    auto tokenMatches = [&](const box::Box& b) {
      return sameToken(token, accessToken(secret, b.id));
    };
    // A signed /files URL stands for the token (E2B's signature.ts), on /files only: it signs
    // a path and an operation there, nothing else.
    const std::string_view target(header.target().data(), header.target().size());
    const bool files = target.substr(0, target.find('?')) == "/files";
    const char* op = header.method() == http::verb::get ? "read" : "write";
    auto signature = [&](const box::Box& b) {
      if (!files) return SignatureCheck::kMissing;
      return checkFileSignature(query, op, accessToken(secret, b.id), box::unixNow());
    };
    // envd's own words for a signature that fails (E2B's SDKs compare them).
    auto badSignature = [](SignatureCheck check) {
      return Error(Errc::kUnauthenticated, std::string(signatureProblem(check)));
    };
    if (!id.empty()) {
      auto b = service.get(id);
      if (!b) {
        return fail(Errc::kUnavailable, fmt::format("The sandbox {} was not found", id));
      }
      if (!token.empty()) {
        if (!tokenMatches(*b)) {
          return fail(Errc::kUnauthenticated, "Wrong X-Access-Token for this sandbox");
        }
      } else if (SignatureCheck check = signature(*b); check != SignatureCheck::kValid) {
        if (check != SignatureCheck::kMissing) return fail(badSignature(check));
        return fail(Errc::kUnauthenticated,
                    "Missing X-Access-Token (the envdAccessToken of the sandbox)");
      }
      found = std::move(*b);
    } else {
      // No routing header (E2B SDKs before 2.14.1 on /files, signed URLs): the sandbox whose
      // token or signature this is.
      std::optional<SignatureCheck> problem;
      auto boxes = service.list();
      if (boxes) {
        for (auto& b : *boxes) {
          if (!token.empty()) {
            if (!tokenMatches(b)) continue;
          } else if (SignatureCheck check = signature(b); check != SignatureCheck::kValid) {
            // Right but expired names its box: say so rather than "no sandbox".
            if (check == SignatureCheck::kExpired) problem = check;
            if (check == SignatureCheck::kInvalid && !problem) problem = check;
            continue;
          }
          found = std::move(b);
          break;
        }
      }
      if (!found && problem) return fail(badSignature(*problem));
      if (!found) {
        return fail(Errc::kUnauthenticated,
                    "No sandbox for this request: send E2b-Sandbox-Id and X-Access-Token");
      }
    }
    params["box"] = found->id;
    api::Principal principal;
    if (found->owner.id.empty()) return api::Principal::host();
    principal.kind = api::Principal::Kind::kKey;
    principal.key_id = found->owner.id;
    principal.key_name = found->owner.name;
    principal.admin = false;
    return principal;
  };
  return plane;
}

}  // namespace hutch::e2b

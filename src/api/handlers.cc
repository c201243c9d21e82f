#include "api/handlers.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <csignal>
#include <functional>

#include "api/json_model.h"
#include "api/openapi.h"
#include "event/async_event.h"
#include "proto/frame.h"
#include "proto/messages.h"
#include "sys/files.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;

const std::string& param(const RequestContext& ctx, const char* name) {
  return ctx.params.find(name)->second;
}

awaitable<Reply> createBox(box::BoxService& service, RequestContext& ctx) {
  auto request = parseCreateBox(ctx.request.body());
  if (!request) co_return errorResponse(request.error());
  request->owner = ctx.principal.owner();
  auto created = co_await service.create(std::move(*request));
  if (!created) co_return errorResponse(created.error());
  co_return jsonResponse(http::status::created, toJson(*created));
}

awaitable<Reply> listBoxes(box::BoxService& service, RequestContext& ctx) {
  auto boxes = service.list(ownerFilter(ctx.principal));
  if (!boxes) co_return errorResponse(boxes.error());
  json items = json::array();
  for (const auto& b : *boxes) items.push_back(toJson(b));
  co_return jsonResponse(http::status::ok, json{{"boxes", items}});
}

awaitable<Reply> getBox(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(param(ctx, "box"));
  if (!b) co_return errorResponse(b.error());
  co_return jsonResponse(http::status::ok, toJson(*b));
}

// POST /v1/boxes/{box}/stop[?shutdown=true]: suspend (memory kept), or a clean shutdown.
awaitable<Reply> stopBox(box::BoxService& service, RequestContext& ctx) {
  bool shutdown = false;
  if (auto it = ctx.query.find("shutdown"); it != ctx.query.end()) {
    if (it->second != "true" && it->second != "false" && it->second != "1" && it->second != "0") {
      co_return errorResponse(
          Error(Errc::kInvalidArgument, "shutdown=" + it->second + " is not true or false"));
    }
    shutdown = it->second == "true" || it->second == "1";
  }
  // No co_await inside a conditional expression: GCC 12 mangles the temporaries.
  Result<box::Box> b = fail(Errc::kInternal, "not stopped");
  if (shutdown) {
    b = co_await service.stop(param(ctx, "box"));
  } else {
    b = co_await service.suspend(param(ctx, "box"));
  }
  if (!b) co_return errorResponse(b.error());
  co_return jsonResponse(http::status::ok, toJson(*b));
}

// PUT /v1/boxes/{box}/timeout {"timeout_s": N, "on_timeout"?: "stop"|"suspend"|"remove"}: the
// box's lifetime ends N seconds from now (0: it has none); on_timeout defaults to what it was,
// else remove.
awaitable<Reply> setTimeout(box::BoxService& service, RequestContext& ctx) {
  auto lifetime = parseLifetime(ctx.request.body());
  if (!lifetime) co_return errorResponse(lifetime.error());
  auto b = service.get(param(ctx, "box"));
  if (!b) co_return errorResponse(b.error());
  box::Expiry action = lifetime->on_expiry;
  if (action == box::Expiry::kNone) {
    action = b->on_expiry == box::Expiry::kNone ? box::Expiry::kRemove : b->on_expiry;
  }
  const int64_t at = lifetime->timeout_s == 0 ? 0 : box::unixNow() + lifetime->timeout_s;
  auto set = service.setLifetime(b->id, at, action);
  if (!set) co_return errorResponse(set.error());
  co_return jsonResponse(http::status::ok, toJson(*set));
}

awaitable<Reply> startBox(box::BoxService& service, RequestContext& ctx) {
  auto b = co_await service.start(param(ctx, "box"));
  if (!b) co_return errorResponse(b.error());
  co_return jsonResponse(http::status::ok, toJson(*b));
}

awaitable<Reply> removeBox(box::BoxService& service, RequestContext& ctx) {
  auto removed = co_await service.remove(param(ctx, "box"), queryFlag(ctx.query, "force"));
  if (!removed) co_return errorResponse(removed.error());
  co_return jsonResponse(http::status::ok, json{{"removed", param(ctx, "box")}});
}

awaitable<Reply> forkBox(box::BoxService& service, RequestContext& ctx) {
  auto spec = parseFork(ctx.request.body());
  if (!spec) co_return errorResponse(spec.error());
  auto children = co_await service.fork(param(ctx, "box"), std::move(*spec));
  if (!children) co_return errorResponse(children.error());
  json items = json::array();
  for (const auto& b : *children) items.push_back(toJson(b));
  co_return jsonResponse(http::status::created, json{{"boxes", items}});
}

awaitable<Reply> createCheckpoint(box::BoxService& service, RequestContext& ctx) {
  auto name = parseCheckpoint(ctx.request.body());
  if (!name) co_return errorResponse(name.error());
  auto snap = co_await service.checkpoint(param(ctx, "box"), std::move(*name));
  if (!snap) co_return errorResponse(snap.error());
  co_return jsonResponse(http::status::created, toJson(*snap));
}

awaitable<Reply> listCheckpoints(box::BoxService& service, RequestContext& ctx) {
  auto list = service.checkpoints(param(ctx, "box"));
  if (!list) co_return errorResponse(list.error());
  json items = json::array();
  for (const auto& s : *list) items.push_back(toJson(s));
  co_return jsonResponse(http::status::ok, json{{"checkpoints", items}});
}

awaitable<Reply> removeCheckpoint(box::BoxService& service, RequestContext& ctx) {
  auto removed = co_await service.removeCheckpoint(param(ctx, "box"), param(ctx, "checkpoint"));
  if (!removed) co_return errorResponse(removed.error());
  co_return jsonResponse(http::status::ok, json{{"removed", param(ctx, "checkpoint")}});
}

awaitable<Reply> rollbackBox(box::BoxService& service, RequestContext& ctx) {
  auto checkpoint = parseRollback(ctx.request.body());
  if (!checkpoint) co_return errorResponse(checkpoint.error());
  auto b = co_await service.rollback(param(ctx, "box"), *checkpoint);
  if (!b) co_return errorResponse(b.error());
  co_return jsonResponse(http::status::ok, toJson(*b));
}

awaitable<Reply> diskUsage(box::BoxService& service, RequestContext&) {
  auto usage = service.diskUsage();
  if (!usage) co_return errorResponse(usage.error());
  co_return jsonResponse(http::status::ok, toJson(*usage));
}

awaitable<Reply> poolStatus(box::BoxService& service, RequestContext&) {
  json pools = json::array();
  for (const box::PoolStatus& pool : service.poolStatus()) pools.push_back(toJson(pool));
  co_return jsonResponse(http::status::ok, json{{"pools", pools}});
}

awaitable<Reply> boxLogs(box::BoxService& service, RequestContext& ctx) {
  auto path = service.consoleLog(param(ctx, "box"));
  if (!path) co_return errorResponse(path.error());
  // The box's uid owns its directory: never follow a link or open a FIFO there.
  constexpr size_t kMaxLog = 64 << 20;
  auto text = sys::readTail(*path, kMaxLog);
  Response res{http::status::ok, 11};
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.body() = text ? std::move(*text) : std::string();
  res.prepare_payload();
  co_return res;
}

// GET /v1/boxes/{box}/stats: what the box's VMM uses of the host (its cgroup).
awaitable<Reply> boxStats(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(param(ctx, "box"));
  if (!b) co_return errorResponse(b.error());
  auto usage = service.usage(b->id);
  if (!usage) co_return errorResponse(usage.error());
  json memory = {{"bytes", usage->memory_bytes},
                 {"peak_bytes", usage->memory_peak_bytes},
                 {"max_bytes", usage->memory_max_bytes}};
  json body = {{"id", b->id},
               {"name", b->name},
               {"uid", usage->uid},
               {"memory", memory},
               {"cpu_ns", usage->cpu_ns},
               {"pids", {{"current", usage->pids}, {"max", usage->pids_max}}},
               {"oom_kills", usage->oom_kills},
               {"io_weights", usage->io_weights}};
  co_return jsonResponse(http::status::ok, body);
}

awaitable<Reply> info(const DaemonInfo& info, RequestContext& ctx) {
  const Principal& p = ctx.principal;
  json caller = {{"name", p.key_name},
                 {"admin", p.admin},
                 {"max_boxes", p.quota.max_boxes},
                 {"max_cpus", p.quota.max_cpus},
                 {"max_memory_mib", p.quota.max_memory_mib},
                 {"max_disk_mib", p.quota.max_disk_mib}};
  json body = {
      {"version", info.version},
      {"backend", info.backend},
      {"accel", {{"name", vmm::accelName(info.accel.accel)}, {"reason", info.accel.reason}}},
      {"caller", caller},
      {"listeners", info.server ? info.server->listeners() : std::vector<std::string>{}},
      {"tls", info.tls_fingerprint.empty() ? json(nullptr)
                                           : json{{"fingerprint_sha256", info.tls_fingerprint}}}};
  // Where the state lives is the host's business.
  if (p.seesEverything()) body["state_dir"] = info.state_dir;
  co_return jsonResponse(http::status::ok, body);
}

awaitable<Reply> listTemplates(box::TemplateService& templates, RequestContext& ctx) {
  auto all = templates.list();
  if (!all) co_return errorResponse(all.error());
  // Which boxes use a template, and where it lives, are the host's business.
  if (!ctx.principal.seesEverything()) {
    for (json& t : *all) {
      t.erase("used_by");
      t.erase("dir");
    }
  }
  co_return jsonResponse(http::status::ok, json{{"templates", *all}});
}

// {"name": N, "from_box": B} freezes a stopped box; {"name": N} builds recipe N.
// A recipe build whose output goes to the client as NDJSON progress lines while it runs.
}  // namespace

// Streamed template creations (handlers.h streamBuild), shared with build_handlers.cc.
struct BuildProgress {
  explicit BuildProgress(const asio::any_io_executor& ex) : changed(ex) {}
  event::AsyncEvent changed;
  std::string pending;  // output not sent yet
  std::optional<Result<json>> done;
};

awaitable<void> runBuild(TemplateMaker make, std::shared_ptr<BuildProgress> progress,
                         asio::any_io_executor ex) {
  // Called on a worker thread: the text is handed to the loop.
  auto on_output = [progress, ex](std::string_view text) {
    asio::post(ex, [progress, chunk = std::string(text)] {
      progress->pending += chunk;
      progress->changed.notify();
    });
  };
  auto made = co_await make(on_output);
  // After the output posted before it.
  asio::post(ex, [progress, made = std::move(made)]() mutable {
    progress->done = std::move(made);
    progress->changed.notify();
  });
}

std::string ndjson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

// A blank line (NDJSON readers skip it) after this long without output: a client that went away
// is noticed even while a pull makes no progress.
constexpr auto kKeepAlive = std::chrono::seconds(5);

awaitable<Reply> streamBuild(RequestContext& ctx, TemplateMaker make, sys::CancelFlag cancel) {
  asio::any_io_executor ex = ctx.connection->stream.get_executor();
  auto progress = std::make_shared<BuildProgress>(ex);
  asio::co_spawn(ex, runBuild(std::move(make), progress, ex), asio::detached);
  ChunkedWriter out(*ctx.connection);
  bool open = co_await out.start(http::status::ok, "application/x-ndjson");
  while (open) {
    size_t newline;
    while (open && (newline = progress->pending.find('\n')) != std::string::npos) {
      json line;
      line["progress"] = progress->pending.substr(0, newline);
      progress->pending.erase(0, newline + 1);
      std::string text = ndjson(line);
      open = co_await out.write(text);
    }
    if (progress->done || !open) break;
    const auto quiet_until = event::AsyncEvent::Clock::now() + kKeepAlive;
    co_await progress->changed.waitUntil(quiet_until);
    if (!progress->done && progress->pending.find('\n') == std::string::npos &&
        event::AsyncEvent::Clock::now() >= quiet_until) {
      open = co_await out.write("\n");
    }
  }
  if (!open && cancel) cancel->store(true);
  // A recipe build goes on if the client left; its result is the template either way.
  while (open && !progress->done) co_await progress->changed.wait();
  if (!open) co_return std::nullopt;
  if (!progress->pending.empty()) {
    json rest;
    rest["progress"] = progress->pending;
    std::string text = ndjson(rest);
    open = co_await out.write(text);
  }
  const Result<json>& made = *progress->done;
  json last;
  if (made) {
    last["template"] = *made;
  } else {
    last = errorJson(made.error());
  }
  std::string text = ndjson(last);
  if (!open || !co_await out.write(text)) co_return std::nullopt;
  if (co_await out.finish()) ctx.keep_alive = true;
  co_return std::nullopt;
}

namespace {

awaitable<Reply> createTemplate(box::TemplateService& templates, RequestContext& ctx) {
  auto body = parseObject(ctx.request.body());
  if (!body) co_return errorResponse(body.error());
  for (const auto& [key, _] : body->items()) {
    if (key != "name" && key != "from_box" && key != "from_image" && key != "systemd") {
      co_return errorResponse(Error(Errc::kInvalidArgument, "Unknown field '" + key +
                                                                "'; known fields: from_box, "
                                                                "from_image, name, systemd"));
    }
  }
  if (!(*body)["name"].is_string() ||
      (body->contains("from_box") && !(*body)["from_box"].is_string()) ||
      (body->contains("from_image") && !(*body)["from_image"].is_string())) {
    co_return errorResponse(Error(Errc::kInvalidArgument,
                                  "'name' (and 'from_box' or 'from_image' if given) must be "
                                  "strings"));
  }
  if (body->contains("systemd") && !(*body)["systemd"].is_boolean()) {
    co_return errorResponse(Error(Errc::kInvalidArgument, "'systemd' must be true or false"));
  }
  std::string name = (*body)["name"];
  std::string from_box = body->value("from_box", "");
  std::string from_image = body->value("from_image", "");
  const bool systemd = body->value("systemd", false);
  if (!from_box.empty() && !from_image.empty()) {
    co_return errorResponse(Error(Errc::kInvalidArgument,
                                  "Give 'from_box' or 'from_image', not both: a template comes "
                                  "from one source"));
  }
  if (systemd && from_image.empty()) {
    co_return errorResponse(Error(Errc::kInvalidArgument,
                                  "'systemd' is for a template from an image (from_image, or an "
                                  "archive): a recipe or a box keeps the init it has"));
  }
  const auto init =
      systemd ? box::TemplateService::ImageInit::kSystemd : box::TemplateService::ImageInit::kAgent;
  Result<json> made = json();
  TemplateMaker make;
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  if (!from_image.empty()) {
    make = [&templates, name, from_image, cancel, init](box::TemplateService::Progress progress) {
      return templates.createFromImage(name, from_image, std::move(progress), cancel, {}, init);
    };
  } else if (from_box.empty()) {
    make = [&templates, name](box::TemplateService::Progress progress) {
      return templates.build(name, std::move(progress));
    };
  }
  if (make &&
      ctx.request[http::field::accept].find("application/x-ndjson") != std::string_view::npos) {
    co_return co_await streamBuild(ctx, std::move(make), cancel);
  }
  if (make) {
    made = co_await make({});
  } else {
    made = co_await templates.createFromBox(name, from_box);
  }
  if (!made) co_return errorResponse(made.error());
  co_return jsonResponse(http::status::created, *made);
}

// An error for a request whose body the client may still be sending (it did not wait for "100
// Continue", or the body was being read): up to 16 MiB more of the body is read and dropped
// first, so that the client, still writing, gets this answer rather than a reset connection.
awaitable<Reply> refuseUpload(RequestContext& ctx, bool reading, const Error& error) {
  const bool waits = beast::iequals(ctx.request[http::field::expect], "100-continue");
  constexpr size_t kDrain = size_t{16} << 20;
  for (size_t drained = 0; (reading || !waits) && !ctx.body->done() && drained < kDrain;) {
    auto chunk = co_await ctx.body->read();
    if (!chunk || chunk->empty()) break;
    drained += chunk->size();
  }
  co_return errorResponse(error);
}

// POST /v1/templates/{template}/archive[?image=NAME][&systemd=true]: template {template} of an
// image archive,
// the body (a docker save or OCI archive tar, plain or compressed; docs/templates.md
// "Archives"). Refusals of the name come before the body is read (with Expect: 100-continue,
// before it is sent); then, as POST /v1/templates, NDJSON progress or 201 Template.
awaitable<Reply> createTemplateFromArchive(box::TemplateService& templates, RequestContext& ctx) {
  for (const auto& [key, value] : ctx.query) {
    if (key != "image" && key != "systemd") {
      co_return co_await refuseUpload(
          ctx, false,
          Error(Errc::kInvalidArgument,
                "Unknown parameter '" + key + "'; known parameters: image, systemd"));
    }
    if (key == "systemd" && value != "true" && value != "false") {
      co_return co_await refuseUpload(
          ctx, false, Error(Errc::kInvalidArgument, "systemd must be true or false"));
    }
  }
  const std::string name = param(ctx, "template");
  const std::string image = ctx.query.contains("image") ? ctx.query.at("image") : "";
  const auto init = ctx.query.contains("systemd") && ctx.query.at("systemd") == "true"
                        ? box::TemplateService::ImageInit::kSystemd
                        : box::TemplateService::ImageInit::kAgent;
  BodyReader& body = *ctx.body;
  bool reading = false;
  auto received = co_await templates.receiveArchive(name, body.contentLength(), [&] {
    reading = true;
    return body.read();
  });
  if (!received) co_return co_await refuseUpload(ctx, reading, received.error());
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  TemplateMaker make = [&templates, name, image, archive = *received, cancel,
                        init](box::TemplateService::Progress progress) {
    return templates.createFromArchive(name, archive, image, std::move(progress), cancel, init);
  };
  if (ctx.request[http::field::accept].find("application/x-ndjson") != std::string_view::npos) {
    co_return co_await streamBuild(ctx, std::move(make), cancel);
  }
  auto made = co_await make({});
  if (!made) co_return errorResponse(made.error());
  co_return jsonResponse(http::status::created, *made);
}

// GET /v1/registries, PUT /v1/registries/{registry} {username, password}, DELETE: the
// credentials hutchd pulls images with (admin only; passwords never come back).
awaitable<Reply> listRegistries(box::TemplateService& templates, RequestContext& /*ctx*/) {
  auto logins = templates.registryLogins();
  if (!logins) co_return errorResponse(logins.error());
  json items = json::array();
  for (const auto& l : *logins)
    items.push_back({{"registry", l.registry}, {"username", l.username}});
  co_return jsonResponse(http::status::ok, json{{"registries", items}});
}

awaitable<Reply> loginRegistry(box::TemplateService& templates, RequestContext& ctx) {
  auto body = parseObject(ctx.request.body());
  if (!body) co_return errorResponse(body.error());
  for (const auto& [key, _] : body->items()) {
    if (key != "username" && key != "password") {
      co_return errorResponse(Error(
          Errc::kInvalidArgument, "Unknown field '" + key + "'; known fields: password, username"));
    }
  }
  if (!body->value("username", json()).is_string() ||
      !body->value("password", json()).is_string()) {
    co_return errorResponse(
        Error(Errc::kInvalidArgument, "'username' and 'password' are required strings"));
  }
  auto login =
      templates.registryLogin(param(ctx, "registry"), (*body)["username"].get<std::string>(),
                              (*body)["password"].get<std::string>());
  if (!login) co_return errorResponse(login.error());
  co_return jsonResponse(http::status::ok,
                         json{{"registry", login->registry}, {"username", login->username}});
}

awaitable<Reply> logoutRegistry(box::TemplateService& templates, RequestContext& ctx) {
  auto removed = templates.registryLogout(param(ctx, "registry"));
  if (!removed) co_return errorResponse(removed.error());
  co_return jsonResponse(http::status::ok, json{{"removed", *removed}});
}

awaitable<Reply> removeTemplate(box::TemplateService& templates, RequestContext& ctx) {
  auto removed = templates.remove(param(ctx, "template"));
  if (!removed) co_return errorResponse(removed.error());
  co_return jsonResponse(http::status::ok, json{{"removed", param(ctx, "template")}});
}

// POST /v1/images/prune {"dry_run": bool, "keep_s": seconds}: the image cache's unused builds.
awaitable<Reply> pruneImages(box::TemplateService& templates, RequestContext& ctx) {
  json body = json::object();
  if (!ctx.request.body().empty()) {
    auto parsed = parseObject(ctx.request.body());
    if (!parsed) co_return errorResponse(parsed.error());
    body = std::move(*parsed);
  }
  storage::PruneOptions options;
  for (const auto& [key, value] : body.items()) {
    if (key == "dry_run" && value.is_boolean()) {
      options.dry_run = value.get<bool>();
    } else if (key == "keep_s" && value.is_number_unsigned()) {
      // Capped at a century: a larger count would overflow the clock's arithmetic.
      constexpr uint64_t kCentury = 100ULL * 366 * 86400;
      options.keep = std::chrono::seconds(std::min(value.get<uint64_t>(), kCentury));
    } else {
      co_return errorResponse(Error(Errc::kInvalidArgument,
                                    fmt::format("Bad field '{}'; known fields: dry_run (boolean), "
                                                "keep_s (seconds, 0 or more)",
                                                key)));
    }
  }
  auto pruned = co_await templates.prune(options);
  if (!pruned) co_return errorResponse(pruned.error());
  co_return jsonResponse(http::status::ok, *pruned);
}

template <class F, class Service>
Handler bindService(F f, Service& service) {
  return [f, &service](RequestContext& ctx) { return f(service, ctx); };
}

}  // namespace

storage::OwnerFilter ownerFilter(const Principal& principal) {
  if (principal.seesEverything()) return std::nullopt;
  return principal.key_id;
}

ParamScoper boxScoper(box::BoxService& service) {
  return [&service](const Principal& principal, PathParams& params) -> Result<> {
    auto it = params.find("box");
    if (it == params.end()) return ok();
    HUTCH_TRY(box::Box b, service.get(it->second, ownerFilter(principal)));
    it->second = b.id;
    return ok();
  };
}

void registerRoutes(ApiRouter& router, box::BoxService& service, box::TemplateService& templates,
                    const DaemonInfo& daemon) {
  using http::verb;
  router.add(verb::get, "/v1/info", [&daemon](RequestContext& ctx) { return info(daemon, ctx); });
  router.add(verb::get, "/v1/openapi.json",
             [](RequestContext&) -> asio::awaitable<std::optional<Response>> {
               Response res{http::status::ok, 11};
               res.set(http::field::content_type, "application/json");
               res.body() = std::string(openApiJson());
               res.prepare_payload();
               co_return res;
             });
  router.add(verb::post, "/v1/boxes", bindService(createBox, service));
  router.add(verb::get, "/v1/boxes", bindService(listBoxes, service));
  router.add(verb::get, "/v1/boxes/{box}", bindService(getBox, service));
  router.add(verb::delete_, "/v1/boxes/{box}", bindService(removeBox, service));
  router.add(verb::post, "/v1/boxes/{box}/start", bindService(startBox, service));
  router.add(verb::post, "/v1/boxes/{box}/stop", bindService(stopBox, service));
  router.add(verb::put, "/v1/boxes/{box}/timeout", bindService(setTimeout, service));
  router.add(verb::get, "/v1/boxes/{box}/logs", bindService(boxLogs, service));
  router.add(verb::get, "/v1/boxes/{box}/stats", bindService(boxStats, service));
  router.add(verb::post, "/v1/boxes/{box}/fork", bindService(forkBox, service));
  router.add(verb::post, "/v1/boxes/{box}/checkpoints", bindService(createCheckpoint, service));
  router.add(verb::get, "/v1/boxes/{box}/checkpoints", bindService(listCheckpoints, service));
  router.add(verb::delete_, "/v1/boxes/{box}/checkpoints/{checkpoint}",
             bindService(removeCheckpoint, service));
  router.add(verb::post, "/v1/boxes/{box}/rollback", bindService(rollbackBox, service));
  registerDiffRoutes(router, service);
  const RouteOptions admin{.access = Access::kAdmin};
  router.add(verb::get, "/v1/system/df", Route(bindService(diskUsage, service), admin));
  router.add(verb::get, "/v1/system/pool", Route(bindService(poolStatus, service), admin));
  router.add(verb::get, "/v1/templates", bindService(listTemplates, templates));
  router.add(verb::post, "/v1/templates", Route(bindService(createTemplate, templates), admin));
  router.add(verb::post, "/v1/templates/{template}/archive",
             Route(bindService(createTemplateFromArchive, templates),
                   {.access = Access::kAdmin, .stream_body = true}));
  router.add(verb::post, "/v1/images/prune", Route(bindService(pruneImages, templates), admin));
  router.add(verb::get, "/v1/registries", Route(bindService(listRegistries, templates), admin));
  router.add(verb::put, "/v1/registries/{registry}",
             Route(bindService(loginRegistry, templates), admin));
  router.add(verb::delete_, "/v1/registries/{registry}",
             Route(bindService(logoutRegistry, templates), admin));
  router.add(verb::delete_, "/v1/templates/{template}",
             Route(bindService(removeTemplate, templates), admin));
}

}  // namespace hutch::api

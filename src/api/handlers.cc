#include "api/handlers.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/write.hpp>
#include <csignal>

#include "api/json_model.h"
#include "proto/frame.h"
#include "proto/messages.h"
#include "sys/files.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;

constexpr uint32_t kExecStream = 1;  // the one stream of an upgraded exec connection

const std::string& param(const RequestContext& ctx, const char* name) {
  return ctx.params.find(name)->second;
}

awaitable<Reply> createBox(box::BoxService& service, RequestContext& ctx) {
  auto request = parseCreateBox(ctx.request.body());
  if (!request) co_return errorResponse(request.error());
  auto created = co_await service.create(std::move(*request));
  if (!created) co_return errorResponse(created.error());
  co_return jsonResponse(http::status::created, toJson(*created));
}

awaitable<Reply> listBoxes(box::BoxService& service, RequestContext&) {
  auto boxes = service.list();
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

awaitable<Reply> stopBox(box::BoxService& service, RequestContext& ctx) {
  auto b = co_await service.stop(param(ctx, "box"));
  if (!b) co_return errorResponse(b.error());
  co_return jsonResponse(http::status::ok, toJson(*b));
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

awaitable<Reply> info(const DaemonInfo& info, RequestContext&) {
  co_return jsonResponse(
      http::status::ok,
      json{{"version", info.version},
           {"backend", info.backend},
           {"state_dir", info.state_dir},
           {"accel", {{"name", vmm::accelName(info.accel.accel)}, {"reason", info.accel.reason}}}});
}

// Sends frames to the client, one at a time (the writer side of an exec relay).
awaitable<bool> sendFrame(Connection& c, const proto::Frame& frame) {
  std::string bytes = proto::encodeFrame(frame);
  boost::system::error_code ec;
  co_await asio::async_write(c.socket, asio::buffer(bytes),
                             asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

// Client -> guest: stdin, stdin EOF and signals, until the client goes away or the exec ends.
awaitable<void> relayInput(std::shared_ptr<Connection> c,
                           std::shared_ptr<guest::ExecSession> session,
                           std::shared_ptr<bool> finished) {
  proto::FrameDecoder decoder;
  auto leftover = c->buffer.data();
  decoder.feed(std::span<const char>(static_cast<const char*>(leftover.data()), leftover.size()));
  c->buffer.consume(c->buffer.size());
  std::string buf(64 * 1024, '\0');
  while (!*finished) {
    auto next = decoder.next();
    if (!next) {
      spdlog::warn("api: bad frame from an exec client: {}", next.error().message());
      break;
    }
    if (!*next) {
      boost::system::error_code ec;
      size_t n = co_await c->socket.async_read_some(asio::buffer(buf),
                                                    asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      decoder.feed(std::span<const char>(buf.data(), n));
      continue;
    }
    const proto::Frame& frame = **next;
    if (frame.type == proto::FrameType::kStdin) {
      auto written = co_await session->writeStdin(frame.payload);
      if (!written) break;
    } else if (frame.type == proto::FrameType::kStdinEof) {
      (void)session->closeStdin();
    } else if (frame.type == proto::FrameType::kSignal) {
      auto sig = proto::decodeMessage<proto::SignalRequest>(frame.payload);
      if (sig) (void)session->signal(sig->signal);
    } else if (frame.type == proto::FrameType::kResize) {
      auto size = proto::decodeMessage<proto::WindowSize>(frame.payload);
      if (size) (void)session->resize(size->rows, size->cols);
    }
  }
  // The client is gone (or sent garbage) while the command still runs: kill it, as a terminal
  // hang-up would, so nothing is left running unobserved.
  if (!*finished) (void)session->signal(SIGKILL);
}

awaitable<Reply> execInBox(box::BoxService& service, RequestContext& ctx) {
  auto upgrade = ctx.request[http::field::upgrade];
  if (!boost::beast::iequals(upgrade, "hutch-exec")) {
    co_return errorResponse(Error(Errc::kInvalidArgument,
                                  "exec needs an upgraded connection: send 'Connection: Upgrade' "
                                  "and 'Upgrade: hutch-exec' (see docs/api.md)"));
  }
  auto request = proto::decodeMessage<proto::ExecRequest>(ctx.request.body());
  if (!request) {
    co_return errorResponse(
        Error(Errc::kInvalidArgument, "Bad exec request: " + request.error().message()));
  }
  if (request->user.empty()) request->user = service.defaultUser();
  auto valid = proto::validate(*request);
  if (!valid) co_return errorResponse(valid.error());
  auto agent = service.agentFor(param(ctx, "box"));
  if (!agent) co_return errorResponse(agent.error());
  if (auto b = service.get(param(ctx, "box")); b) addBoxEnvironment(*b, *request);

  std::shared_ptr<Connection> c = ctx.connection;
  Response res{http::status::switching_protocols, 11};
  res.set(http::field::connection, "Upgrade");
  res.set(http::field::upgrade, "hutch-exec");
  boost::system::error_code ec;
  co_await http::async_write(c->socket, res, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  // From here on errors travel as frames: a command that cannot start is the command's failure
  // (exit 127/126 in the CLI), not the API call's.
  auto session = co_await (*agent)->exec(std::move(*request));
  if (!session) {
    co_await sendFrame(*c, proto::makeFrame(proto::FrameType::kError, kExecStream,
                                            proto::ErrorMessage::fromError(session.error())));
    c->socket.close(ec);
    co_return std::nullopt;
  }
  auto finished = std::make_shared<bool>(false);
  asio::co_spawn(c->socket.get_executor(), relayInput(c, *session, finished), asio::detached);

  // Guest -> client. Pulling the next event is what grants the guest more window, so a slow
  // client slows the command down instead of filling hutchd's memory.
  while (true) {
    auto event = co_await (*session)->next();
    if (!event) {
      *finished = true;
      co_await sendFrame(*c, proto::makeFrame(proto::FrameType::kError, kExecStream,
                                              proto::ErrorMessage::fromError(event.error())));
      break;
    }
    proto::Frame frame;
    frame.stream = kExecStream;
    bool last = false;
    switch (event->kind) {
      case guest::ExecEvent::Kind::kStdout:
        frame.type = proto::FrameType::kStdout;
        frame.payload = std::move(event->data);
        break;
      case guest::ExecEvent::Kind::kStderr:
        frame.type = proto::FrameType::kStderr;
        frame.payload = std::move(event->data);
        break;
      case guest::ExecEvent::Kind::kExit:
        frame = proto::makeFrame(proto::FrameType::kExit, kExecStream, event->exit_status);
        last = true;
        break;
    }
    if (last) *finished = true;
    if (!co_await sendFrame(*c, frame)) {
      if (!last) (void)(*session)->signal(SIGKILL);
      break;
    }
    if (last) break;
  }
  c->socket.shutdown(asio::local::stream_protocol::socket::shutdown_both, ec);
  c->socket.close(ec);
  co_return std::nullopt;
}

awaitable<Reply> listTemplates(box::TemplateService& templates, RequestContext&) {
  auto all = templates.list();
  if (!all) co_return errorResponse(all.error());
  co_return jsonResponse(http::status::ok, json{{"templates", *all}});
}

// {"name": N, "from_box": B} freezes a stopped box; {"name": N} builds recipe N.
awaitable<Reply> createTemplate(box::TemplateService& templates, RequestContext& ctx) {
  auto body = parseObject(ctx.request.body());
  if (!body) co_return errorResponse(body.error());
  for (const auto& [key, _] : body->items()) {
    if (key != "name" && key != "from_box") {
      co_return errorResponse(Error(Errc::kInvalidArgument,
                                    "Unknown field '" + key + "'; known fields: from_box, name"));
    }
  }
  if (!(*body)["name"].is_string() ||
      (body->contains("from_box") && !(*body)["from_box"].is_string())) {
    co_return errorResponse(
        Error(Errc::kInvalidArgument, "'name' (and 'from_box' if given) must be strings"));
  }
  std::string name = (*body)["name"];
  std::string from_box = body->value("from_box", "");
  Result<json> made = json();
  if (from_box.empty()) {
    made = co_await templates.build(name);
  } else {
    made = co_await templates.createFromBox(name, from_box);
  }
  if (!made) co_return errorResponse(made.error());
  co_return jsonResponse(http::status::created, *made);
}

awaitable<Reply> removeTemplate(box::TemplateService& templates, RequestContext& ctx) {
  auto removed = templates.remove(param(ctx, "template"));
  if (!removed) co_return errorResponse(removed.error());
  co_return jsonResponse(http::status::ok, json{{"removed", param(ctx, "template")}});
}

template <class F, class Service>
Handler bindService(F f, Service& service) {
  return [f, &service](RequestContext& ctx) { return f(service, ctx); };
}

}  // namespace

void registerRoutes(Router<Handler>& router, box::BoxService& service,
                    box::TemplateService& templates, const DaemonInfo& daemon) {
  using http::verb;
  router.add(verb::get, "/v1/info", [&daemon](RequestContext& ctx) { return info(daemon, ctx); });
  router.add(verb::post, "/v1/boxes", bindService(createBox, service));
  router.add(verb::get, "/v1/boxes", bindService(listBoxes, service));
  router.add(verb::get, "/v1/boxes/{box}", bindService(getBox, service));
  router.add(verb::delete_, "/v1/boxes/{box}", bindService(removeBox, service));
  router.add(verb::post, "/v1/boxes/{box}/start", bindService(startBox, service));
  router.add(verb::post, "/v1/boxes/{box}/stop", bindService(stopBox, service));
  router.add(verb::get, "/v1/boxes/{box}/logs", bindService(boxLogs, service));
  router.add(verb::get, "/v1/boxes/{box}/stats", bindService(boxStats, service));
  router.add(verb::post, "/v1/boxes/{box}/fork", bindService(forkBox, service));
  router.add(verb::post, "/v1/boxes/{box}/checkpoints", bindService(createCheckpoint, service));
  router.add(verb::get, "/v1/boxes/{box}/checkpoints", bindService(listCheckpoints, service));
  router.add(verb::delete_, "/v1/boxes/{box}/checkpoints/{checkpoint}",
             bindService(removeCheckpoint, service));
  router.add(verb::post, "/v1/boxes/{box}/rollback", bindService(rollbackBox, service));
  router.add(verb::get, "/v1/system/df", bindService(diskUsage, service));
  router.add(verb::get, "/v1/system/pool", bindService(poolStatus, service));
  router.add(verb::post, "/v1/boxes/{box}/exec", bindService(execInBox, service));
  router.add(verb::get, "/v1/templates", bindService(listTemplates, templates));
  router.add(verb::post, "/v1/templates", bindService(createTemplate, templates));
  router.add(verb::delete_, "/v1/templates/{template}", bindService(removeTemplate, templates));
}

}  // namespace hutch::api

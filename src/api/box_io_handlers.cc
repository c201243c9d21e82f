// Routes for what runs and listens inside a box (docs/api.md): published ports, detached
// processes and the image's services. Thin: decode, call, map errors.
#include <fmt/format.h>

#include <charconv>
#include <csignal>

#include "api/exec_model.h"
#include "api/handlers.h"
#include "api/json_model.h"
#include "proto/processes.h"
#include "proto/services.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;

constexpr auto kAgentTimeout = std::chrono::seconds(15);

const std::string& param(const RequestContext& ctx, const char* name) {
  return ctx.params.find(name)->second;
}

// Our own encoding of the agent's objects: the API passes them through.
template <class T>
json viaProto(const T& message) {
  return json::parse(proto::encodeMessage(message));
}

Result<uint16_t> portParam(const std::string& text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    return fail(Errc::kInvalidArgument, fmt::format("'{}' is not a port (1-65535)", text));
  }
  return static_cast<uint16_t>(value);
}

awaitable<Reply> addPort(box::PortForwards& ports, RequestContext& ctx) {
  auto forward = parsePortForward(ctx.request.body());
  if (!forward) co_return errorResponse(forward.error());
  auto added = ports.add(param(ctx, "box"), std::move(*forward));
  if (!added) co_return errorResponse(added.error());
  co_return jsonResponse(http::status::created, toJson(*added));
}

awaitable<Reply> listPorts(box::PortForwards& ports, RequestContext& ctx) {
  auto listed = ports.list(param(ctx, "box"));
  if (!listed) co_return errorResponse(listed.error());
  json items = json::array();
  for (const auto& p : *listed) items.push_back(toJson(p));
  co_return jsonResponse(http::status::ok, json{{"ports", items}});
}

awaitable<Reply> removePort(box::PortForwards& ports, RequestContext& ctx) {
  auto port = portParam(param(ctx, "port"));
  if (!port) co_return errorResponse(port.error());
  std::string address;
  if (auto it = ctx.query.find("address"); it != ctx.query.end()) address = it->second;
  auto removed = ports.remove(param(ctx, "box"), *port, address);
  if (!removed) co_return errorResponse(removed.error());
  co_return jsonResponse(http::status::ok, json{{"removed", *port}});
}

// POST /v1/boxes/{box}/processes: an exec request, run detached.
awaitable<Reply> startProcess(box::BoxService& service, RequestContext& ctx) {
  auto start = parseExecRequest(ctx.request.body(), "a process request");
  if (!start) co_return errorResponse(start.error());
  if (start->timeout_ms != 0) {
    co_return errorResponse(Error(Errc::kInvalidArgument,
                                  "A detached process has no time limit: leave out 'timeout_ms'"));
  }
  auto request = std::optional<proto::ExecRequest>(std::move(start->exec));
  if (request->pipe_stdin || request->tty || request->login_shell) {
    co_return errorResponse(Error(Errc::kInvalidArgument,
                                  "A detached process has no stdin and no terminal (its output "
                                  "goes to a log in the box): drop stdin, tty and login_shell"));
  }
  request->detach = true;
  auto defaults = service.execDefaults(param(ctx, "box"));
  if (request->user.empty()) request->user = defaults.user;
  if (request->cwd.empty()) request->cwd = defaults.cwd;
  auto valid = proto::validate(*request);
  if (!valid) co_return errorResponse(valid.error());
  auto agent = co_await service.agentFor(param(ctx, "box"), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  if (auto b = service.get(param(ctx, "box")); b) addBoxEnvironment(*b, *request);
  std::vector<std::string> argv = request->argv;
  std::string user = request->user;
  auto session = co_await (*agent)->exec(std::move(*request));
  if (!session) co_return errorResponse(session.error());
  co_return jsonResponse(http::status::created, json{{"id", (*session)->detachedId()},
                                                     {"pid", (*session)->pid()},
                                                     {"argv", argv},
                                                     {"user", user},
                                                     {"running", true},
                                                     {"log", (*session)->logPath()}});
}

awaitable<Reply> listProcesses(box::BoxService& service, RequestContext& ctx) {
  auto agent = co_await service.agentFor(param(ctx, "box"), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  auto listed = co_await (*agent)->listProcesses(kAgentTimeout);
  if (!listed) co_return errorResponse(listed.error());
  co_return jsonResponse(http::status::ok, viaProto(*listed));
}

// POST /v1/boxes/{box}/processes/{id}/signal {"signal": N} (default SIGTERM).
awaitable<Reply> signalProcess(box::BoxService& service, RequestContext& ctx) {
  int signo = SIGTERM;
  if (!ctx.request.body().empty()) {
    auto body = parseObject(ctx.request.body());
    if (!body) co_return errorResponse(body.error());
    if (auto unknown = rejectUnknownFields(*body, {"signal"}, "a signal request"); !unknown) {
      co_return errorResponse(unknown.error());
    }
    if (auto it = body->find("signal"); it != body->end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 64) {
        co_return errorResponse(Error(Errc::kInvalidArgument,
                                      "'signal' must be a signal number from 1 to 64 (default "
                                      "15, SIGTERM)"));
      }
      signo = it->get<int>();
    }
  }
  auto agent = co_await service.agentFor(param(ctx, "box"), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  auto sent = co_await (*agent)->signalProcess(param(ctx, "id"), signo, kAgentTimeout);
  if (!sent) co_return errorResponse(sent.error());
  co_return jsonResponse(http::status::ok,
                         json{{"signalled", param(ctx, "id")}, {"signal", signo}});
}

awaitable<Reply> listServices(box::BoxService& service, RequestContext& ctx) {
  auto agent = co_await service.agentFor(param(ctx, "box"), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  auto listed = co_await (*agent)->listServices(kAgentTimeout);
  if (!listed) co_return errorResponse(listed.error());
  co_return jsonResponse(http::status::ok, viaProto(*listed));
}

}  // namespace

void registerBoxIoRoutes(ApiRouter& router, box::BoxService& service, box::PortForwards& ports) {
  using http::verb;
  auto withPorts = [&ports](auto f) {
    return [f, &ports](RequestContext& ctx) { return f(ports, ctx); };
  };
  auto withService = [&service](auto f) {
    return [f, &service](RequestContext& ctx) { return f(service, ctx); };
  };
  router.add(verb::post, "/v1/boxes/{box}/ports", withPorts(addPort));
  router.add(verb::get, "/v1/boxes/{box}/ports", withPorts(listPorts));
  router.add(verb::delete_, "/v1/boxes/{box}/ports/{port}", withPorts(removePort));
  router.add(verb::post, "/v1/boxes/{box}/processes", withService(startProcess));
  router.add(verb::get, "/v1/boxes/{box}/processes", withService(listProcesses));
  router.add(verb::post, "/v1/boxes/{box}/processes/{id}/signal", withService(signalProcess));
  router.add(verb::get, "/v1/boxes/{box}/services", withService(listServices));
}

}  // namespace hutch::api

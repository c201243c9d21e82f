// Exec in a box, three ways (docs/api.md): the upgraded connection carrying agent frames (the
// CLI), a JSON request that runs to completion, and a WebSocket for streams and terminals.
// Thin: decode, check, call the agent, relay.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket.hpp>
#include <csignal>

#include "api/exec_model.h"
#include "api/handlers.h"
#include "api/json_model.h"
#include "proto/frame.h"
#include "proto/messages.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;
namespace websocket = beast::websocket;

constexpr uint32_t kExecStream = 1;  // the one stream of an upgraded exec connection
constexpr std::string_view kWsProtocol = "hutch.exec.v1";
constexpr size_t kStdinChunk = size_t{64} << 10;

// How long a command whose client went away has to exit after its SIGKILL. A guest that never
// sends the exit (a hostile one) would otherwise keep the client's connection, and the relay
// waiting on it, open for as long as the box lives.
constexpr auto kExitAfterKill = std::chrono::seconds(10);

const std::string& param(const RequestContext& ctx, const char* name) {
  return ctx.params.find(name)->second;
}

// The request as the box should run it: the default user and working directory, the box's
// environment.
awaitable<Result<std::shared_ptr<box::BoxAgent>>> prepare(box::BoxService& service,
                                                          const std::string& box,
                                                          const observe::Actor& actor,
                                                          proto::ExecRequest& request) {
  auto defaults = service.execDefaults(box);
  if (request.user.empty()) request.user = defaults.user;
  if (request.cwd.empty()) request.cwd = defaults.cwd;
  HUTCH_CO_TRY_VOID(proto::validate(request));
  HUTCH_CO_TRY(auto agent, co_await service.agentFor(box, actor));
  if (auto b = service.get(box); b) addBoxEnvironment(*b, request);
  co_return agent;
}

awaitable<Result<std::shared_ptr<box::BoxAgent>>> prepare(box::BoxService& service,
                                                          const RequestContext& ctx,
                                                          proto::ExecRequest& request) {
  const observe::Actor actor = ctx.principal.actor();
  co_return co_await prepare(service, param(ctx, "box"), actor, request);
}

// The client of a running command is gone: kill the command, as a terminal hang-up would, so
// nothing is left running unobserved; and stop waiting for its exit after kExitAfterKill.
awaitable<void> killAbandoned(std::shared_ptr<guest::ExecSession> session) {
  (void)session->signal(SIGKILL);
  asio::steady_timer wait(co_await asio::this_coro::executor, kExitAfterKill);
  boost::system::error_code ec;
  co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  session->abandon(
      Error(Errc::kTimeout, fmt::format("The client went away and the command did not exit {} s "
                                        "after SIGKILL; hutch stopped waiting for it",
                                        kExitAfterKill.count())));
}

// Sends frames to the client, one at a time (the writer side of an exec relay).
awaitable<bool> sendFrame(Connection& c, const proto::Frame& frame) {
  std::string bytes = proto::encodeFrame(frame);
  boost::system::error_code ec;
  co_await asio::async_write(c.stream, asio::buffer(bytes),
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
      size_t n = co_await c->stream.async_read_some(asio::buffer(buf),
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
  // The client is gone (or sent garbage) while the command still runs.
  if (!*finished) co_await killAbandoned(session);
}

awaitable<Reply> execUpgraded(box::BoxService& service, RequestContext& ctx) {
  auto start = parseExecRequest(ctx.request.body(), "the exec request");
  if (!start) co_return errorResponse(start.error());
  proto::ExecRequest& request = start->exec;
  auto agent = co_await prepare(service, ctx, request);
  if (!agent) co_return errorResponse(agent.error());

  std::shared_ptr<Connection> c = ctx.connection;
  Response res{http::status::switching_protocols, 11};
  res.set(http::field::connection, "Upgrade");
  res.set(http::field::upgrade, "hutch-exec");
  boost::system::error_code ec;
  co_await http::async_write(c->stream, res, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  // From here on errors travel as frames: a command that cannot start is the command's failure
  // (exit 127/126 in the CLI), not the API call's.
  auto session = co_await (*agent)->exec(std::move(request),
                                         {.timeout = std::chrono::milliseconds(start->timeout_ms)});
  if (!session) {
    co_await sendFrame(*c, proto::makeFrame(proto::FrameType::kError, kExecStream,
                                            proto::ErrorMessage::fromError(session.error())));
    c->stream.close();
    co_return std::nullopt;
  }
  auto finished = std::make_shared<bool>(false);
  asio::co_spawn(c->stream.get_executor(), relayInput(c, *session, finished), asio::detached);

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
  c->stream.shutdownSend();
  c->stream.close();
  co_return std::nullopt;
}

// Feeds a JSON exec's stdin, then EOF; runs beside the output loop so that neither side waits
// for the other.
awaitable<void> feedStdin(std::shared_ptr<guest::ExecSession> session, std::string data) {
  std::string_view rest(data);
  while (!rest.empty()) {
    std::string_view chunk = rest.substr(0, kStdinChunk);
    if (!co_await session->writeStdin(chunk)) co_return;  // the command ended or closed stdin
    rest.remove_prefix(chunk.size());
  }
  (void)session->closeStdin();
}

// A failure to start the command, as the command's own result (a shell's 127/126).
bool startFailure(const Error& error) {
  return error.code() == Errc::kNotFound || error.code() == Errc::kPermissionDenied ||
         error.code() == Errc::kFailedPrecondition;
}

awaitable<Reply> execJson(box::BoxService& service, RequestContext& ctx) {
  auto run = parseExecRun(ctx.request.body());
  if (!run) co_return errorResponse(run.error());
  const observe::Actor actor = ctx.principal.actor();
  auto outcome = co_await runToCompletion(service, param(ctx, "box"), actor, std::move(*run));
  if (!outcome) co_return errorResponse(outcome.error());
  co_return jsonResponse(http::status::ok, toJson(*outcome));
}

awaitable<Reply> execInBox(box::BoxService& service, RequestContext& ctx) {
  auto upgrade = ctx.request[http::field::upgrade];
  if (beast::iequals(upgrade, "hutch-exec")) co_return co_await execUpgraded(service, ctx);
  if (!upgrade.empty()) {
    co_return errorResponse(Error(Errc::kInvalidArgument,
                                  "exec upgrades only to 'hutch-exec'; for a WebSocket use GET "
                                  "/v1/boxes/{box}/exec/ws (see docs/api.md)"));
  }
  co_return co_await execJson(service, ctx);
}

// ---- WebSocket ----

using WsStream = websocket::stream<AnyStream&>;

// The WebSocket's writes, one at a time: output and control messages come from one coroutine.
awaitable<bool> wsText(WsStream& ws, const json& message) {
  ws.text(true);
  std::string text = message.dump();
  boost::system::error_code ec;
  co_await ws.async_write(asio::buffer(text), asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

awaitable<bool> wsBinary(WsStream& ws, char channel, const std::string& data) {
  ws.binary(true);
  std::string message;
  message.reserve(data.size() + 1);
  message += channel;
  message += data;
  boost::system::error_code ec;
  co_await ws.async_write(asio::buffer(message), asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

awaitable<void> wsClose(WsStream& ws, websocket::close_code code, std::string reason = {}) {
  boost::system::error_code ec;
  if (reason.size() > 120) reason.resize(120);  // a close frame's payload is at most 125 bytes
  co_await ws.async_close(websocket::close_reason(code, reason),
                          asio::redirect_error(asio::use_awaitable, ec));
}

json errorMessage(const Error& error) {
  return json{{"type", "error"},
              {"code", std::string(errcName(error.code()))},
              {"message", error.message()}};
}

// Client -> box: stdin (binary, channel 0) and control messages, until the client closes the
// WebSocket or the exec ends; a client gone early kills the command.
awaitable<void> wsInput(std::shared_ptr<WsStream> ws, std::shared_ptr<Connection> keep,
                        std::shared_ptr<guest::ExecSession> session,
                        std::shared_ptr<bool> finished) {
  beast::flat_buffer buffer;
  while (!*finished) {
    boost::system::error_code ec;
    co_await ws->async_read(buffer, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    std::string message = beast::buffers_to_string(buffer.data());
    buffer.consume(buffer.size());
    if (!ws->got_text()) {
      if (message.empty() || message[0] != 0) continue;  // only channel 0 (stdin) goes in
      if (message.size() > 1 &&
          !co_await session->writeStdin(std::string_view(message).substr(1))) {
        continue;  // stdin is closed or the command ended: the output side reports the exit
      }
      continue;
    }
    auto control = parseWsControl(message);
    if (!control) continue;
    switch (control->kind) {
      case WsControl::Kind::kStdinEof: (void)session->closeStdin(); break;
      case WsControl::Kind::kResize: (void)session->resize(control->rows, control->cols); break;
      case WsControl::Kind::kSignal: (void)session->signal(control->signal); break;
    }
  }
  if (!*finished) co_await killAbandoned(session);
  (void)keep;
}

awaitable<Reply> execWebSocket(box::BoxService& service, RequestContext& ctx) {
  if (!websocket::is_upgrade(ctx.request)) {
    co_return errorResponse(Error(Errc::kInvalidArgument,
                                  "This endpoint is a WebSocket: connect with 'Upgrade: websocket' "
                                  "(subprotocol hutch.exec.v1); see docs/api.md"));
  }
  // Errors that can be told before the upgrade are ordinary answers.
  if (auto agent = co_await service.agentFor(param(ctx, "box"), ctx.principal.actor()); !agent) {
    co_return errorResponse(agent.error());
  }
  std::shared_ptr<Connection> c = ctx.connection;
  auto ws = std::make_shared<WsStream>(c->stream);
  bool offered = false;
  auto protocols = ctx.request[http::field::sec_websocket_protocol];
  if (std::string_view(protocols.data(), protocols.size()).find(kWsProtocol) !=
      std::string_view::npos) {
    offered = true;
  }
  ws->set_option(websocket::stream_base::decorator([offered](websocket::response_type& res) {
    res.set(http::field::server, "hutchd");
    if (offered) res.set(http::field::sec_websocket_protocol, std::string(kWsProtocol));
  }));
  ws->read_message_max(proto::kMaxPayload + 1);
  ws->auto_fragment(false);
  boost::system::error_code ec;
  co_await ws->async_accept(ctx.request, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;

  beast::flat_buffer first;
  co_await ws->async_read(first, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  Result<ExecStart> request =
      ws->got_text() ? parseExecStart(beast::buffers_to_string(first.data()))
                     : fail(Errc::kInvalidArgument,
                            "The first message must be a text message with the exec request");
  Result<std::shared_ptr<box::BoxAgent>> agent = fail(Errc::kInternal, "not prepared");
  if (request) agent = co_await prepare(service, ctx, request->exec);
  if (!request || !agent) {
    const Error& error = !request ? request.error() : agent.error();
    json message = errorMessage(error);
    co_await wsText(*ws, message);
    co_await wsClose(*ws, websocket::close_code::policy_error, error.message());
    co_return std::nullopt;
  }
  auto session = co_await (*agent)->exec(
      std::move(request->exec), {.timeout = std::chrono::milliseconds(request->timeout_ms)});
  if (!session) {
    json message = errorMessage(session.error());
    co_await wsText(*ws, message);
    co_await wsClose(*ws, websocket::close_code::normal);
    co_return std::nullopt;
  }
  std::shared_ptr<guest::ExecSession> s = *session;
  json started{{"type", "started"}, {"pid", s->pid()}};
  if (!co_await wsText(*ws, started)) {
    (void)s->signal(SIGKILL);
    co_return std::nullopt;
  }
  auto finished = std::make_shared<bool>(false);
  asio::co_spawn(c->stream.get_executor(), wsInput(ws, c, s, finished), asio::detached);
  while (true) {
    auto event = co_await s->next();
    if (!event) {
      *finished = true;
      json message = errorMessage(event.error());
      co_await wsText(*ws, message);
      break;
    }
    if (event->kind == guest::ExecEvent::Kind::kExit) {
      *finished = true;
      const proto::ExitStatus& st = event->exit_status;
      json exit_message{{"type", "exit"},
                        {"exit_code", st.code ? json(*st.code) : json(nullptr)},
                        {"signal", st.signal ? json(*st.signal) : json(nullptr)}};
      co_await wsText(*ws, exit_message);
      break;
    }
    char channel = event->kind == guest::ExecEvent::Kind::kStdout ? 1 : 2;
    if (!co_await wsBinary(*ws, channel, event->data)) {
      (void)s->signal(SIGKILL);
      *finished = true;
      co_return std::nullopt;
    }
  }
  co_await wsClose(*ws, websocket::close_code::normal);
  co_return std::nullopt;
}

}  // namespace

awaitable<Result<ExecOutcome>> runToCompletion(box::BoxService& service, const std::string& box,
                                               const observe::Actor& actor, ExecRun run) {
  HUTCH_CO_TRY(auto agent, co_await prepare(service, box, actor, run.exec));
  const auto started_at = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - started_at)
                                     .count());
  };
  ExecOutcome outcome;
  // The time limit is the box agent's (with the box's --max-exec-time): it kills the command's
  // process group, whose exit then ends the loop below.
  auto session =
      co_await agent->exec(run.exec, {.timeout = std::chrono::milliseconds(run.timeout_ms)});
  if (!session) {
    if (!startFailure(session.error())) co_return fail(session.error());
    outcome.error = session.error();
    outcome.status =
        proto::ExitStatus::exited(session.error().code() == Errc::kNotFound ? 127 : 126);
    outcome.stderr_data = "hutch: " + session.error().message() + "\n";
    outcome.duration_ms = elapsed();
    co_return outcome;
  }
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  std::shared_ptr<guest::ExecSession> s = *session;
  outcome.pid = s->pid();
  if (run.stdin_data) {
    asio::co_spawn(executor, feedStdin(s, std::move(*run.stdin_data)), asio::detached);
  }
  auto keep = [&](std::string& into, std::string&& data) {
    uint64_t room = run.max_output_bytes > into.size() ? run.max_output_bytes - into.size() : 0;
    if (data.size() > room) {
      outcome.truncated = true;
      data.resize(room);
    }
    into += data;
  };
  while (true) {
    auto event = co_await s->next();
    if (!event) {
      co_return fail(event.error().withContext("The exec ended without an exit status"));
    }
    if (event->kind == guest::ExecEvent::Kind::kStdout) {
      keep(outcome.stdout_data, std::move(event->data));
    } else if (event->kind == guest::ExecEvent::Kind::kStderr) {
      keep(outcome.stderr_data, std::move(event->data));
    } else {
      outcome.status = event->exit_status;
      break;
    }
  }
  outcome.timed_out = s->timedOut();
  outcome.duration_ms = elapsed();
  co_return outcome;
}

void registerExecRoutes(ApiRouter& router, box::BoxService& service) {
  using http::verb;
  router.add(verb::post, "/v1/boxes/{box}/exec",
             [&service](RequestContext& ctx) { return execInBox(service, ctx); });
  router.add(verb::get, "/v1/boxes/{box}/exec/ws",
             [&service](RequestContext& ctx) { return execWebSocket(service, ctx); });
}

}  // namespace hutch::api

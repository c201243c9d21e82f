// envd's process service (process.Process): commands started, attached to, listed, fed and
// signalled; each outlives the streams that watch it.

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <deque>
#include <list>

#include "api/encoding.h"
#include "api/handlers.h"
#include "e2b/facade_internal.h"
#include "event/async_event.h"
#include "guest/agent_client.h"
#include "guest/exec_session.h"

namespace hutch::e2b {

using api::RequestContext;
using api::Response;
using asio::awaitable;

// One process started through envd's Start: its output goes to every stream attached to it
// (Start's, then Connect's); it outlives them (envd's processes run until they exit or are
// killed) and leaves the table when it ends.
struct Subscriber {
  explicit Subscriber(const asio::any_io_executor& ex) : changed(ex) {}
  event::AsyncEvent changed;
  std::deque<std::string> messages;  // JSON messages to send, in order
  size_t bytes = 0;
  bool ended = false;  // the end event is queued: nothing follows
  bool gone = false;   // the client went away
};

struct Process {
  explicit Process(const asio::any_io_executor& ex) : drained(ex) {}
  uint32_t pid = 0;
  std::optional<std::string> tag;
  ProcessConfig config;
  std::shared_ptr<guest::ExecSession> session;
  std::list<std::shared_ptr<Subscriber>> subscribers;
  event::AsyncEvent drained;  // a subscriber's queue went down
  std::unique_ptr<asio::steady_timer> deadline;
};

namespace {

constexpr size_t kMaxQueuedOutput = size_t{4} << 20;  // per subscriber, before the pump waits

void publish(Process& p, const std::string& message, bool end = false) {
  for (auto it = p.subscribers.begin(); it != p.subscribers.end();) {
    auto& s = *it;
    if (s->gone) {
      it = p.subscribers.erase(it);
      continue;
    }
    s->messages.push_back(message);
    s->bytes += message.size();
    if (end) s->ended = true;
    s->changed.notify();
    ++it;
  }
}

bool congested(const Process& p) {
  for (const auto& s : p.subscribers) {
    if (!s->gone && s->bytes > kMaxQueuedOutput) return true;
  }
  return false;
}

json startEvent(uint32_t pid) {
  return json{{"event", {{"start", {{"pid", pid}}}}}};
}

std::string dataEvent(const char* stream, std::string_view bytes) {
  return json{{"event", {{"data", {{stream, api::base64Encode(bytes)}}}}}}.dump();
}

// Pulls the session's events into the subscribers until the process ends.
awaitable<void> pump(std::shared_ptr<State> state, std::string box, std::shared_ptr<Process> p) {
  json end;
  while (true) {
    while (congested(*p)) {
      co_await p->drained.waitUntil(event::AsyncEvent::Clock::now() + std::chrono::seconds(1));
    }
    auto event = co_await p->session->next();
    if (!event) {
      end = {{"exitCode", -1},
             {"exited", false},
             {"status", "error"},
             {"error", event.error().message()}};
      break;
    }
    if (event->kind == guest::ExecEvent::Kind::kStdout) {
      publish(*p, dataEvent(p->session->tty() ? "pty" : "stdout", event->data));
    } else if (event->kind == guest::ExecEvent::Kind::kStderr) {
      publish(*p, dataEvent("stderr", event->data));
    } else {
      const proto::ExitStatus& st = event->exit_status;
      // Killed by a signal: exitCode -1 and exited false, as Go's ProcessState says it.
      end = {{"exitCode", st.code.value_or(-1)},
             {"exited", st.code.has_value()},
             {"status", exitStatusText(st)}};
      if (!st.code || *st.code != 0) end["error"] = exitStatusText(st);
      break;
    }
  }
  if (p->deadline) p->deadline->cancel();
  publish(*p, json{{"event", {{"end", end}}}}.dump(), true);
  auto b = state->processes.find(box);
  if (b != state->processes.end()) {
    auto it = b->second.find(p->pid);
    if (it != b->second.end() && it->second == p) b->second.erase(it);
    if (b->second.empty()) state->processes.erase(b);
  }
}

// Sends a subscriber's messages as the stream's envelopes until the end event (or the client
// leaves); keepalives while nothing comes.
awaitable<void> follow(RequestContext& ctx, EnvelopeStream& stream, std::shared_ptr<Process> p,
                       std::shared_ptr<Subscriber> sub,
                       std::optional<event::AsyncEvent::Clock::time_point> deadline = {}) {
  const auto keepalive = keepaliveInterval(ctx);
  const json keepalive_message{{"event", {{"keepalive", json::object()}}}};
  while (true) {
    if (deadline && event::AsyncEvent::Clock::now() >= *deadline) {
      // Connect-Timeout-Ms passed (the process was killed at it): the stream ends with
      // deadline_exceeded, as envd's does, whatever is still queued.
      sub->gone = true;
      p->drained.notify();
      const Error late(Errc::kTimeout, "the command ran past its deadline (Connect-Timeout-Ms)");
      co_await stream.finish(late);
      co_return;
    }
    if (sub->messages.empty()) {
      if (sub->ended) break;
      auto wake = event::AsyncEvent::Clock::now() + keepalive;
      if (deadline) wake = std::min(wake, *deadline);
      co_await sub->changed.waitUntil(wake);
      if (deadline && event::AsyncEvent::Clock::now() >= *deadline) continue;
      if (sub->messages.empty() && !sub->ended) {
        if (!co_await stream.send(keepalive_message)) {
          sub->gone = true;
          co_return;
        }
      }
      continue;
    }
    std::string message = std::move(sub->messages.front());
    sub->messages.pop_front();
    sub->bytes -= message.size();
    p->drained.notify();
    if (!co_await stream.sendText(message)) {
      sub->gone = true;
      p->drained.notify();
      co_return;
    }
  }
  co_await stream.finish(std::nullopt);
}

std::shared_ptr<Process> findProcess(State& state, const std::string& box, const Selector& sel) {
  auto b = state.processes.find(box);
  if (b == state.processes.end()) return nullptr;
  if (sel.pid) {
    auto it = b->second.find(*sel.pid);
    return it == b->second.end() ? nullptr : it->second;
  }
  for (auto& [pid, p] : b->second) {
    if (p->tag && sel.tag && *p->tag == *sel.tag) return p;
  }
  return nullptr;
}

Error noSuchProcess(const Selector& sel) {
  return Error(Errc::kNotFound,
               sel.pid ? fmt::format("process with pid {} not found", *sel.pid)
                       : fmt::format("process with tag {} not found", sel.tag.value_or("")));
}

// A unary request about one process: its message and the process its selector names.
struct ProcessCall {
  json message;
  std::shared_ptr<Process> process;
};

Result<ProcessCall> processCall(State& state, const RequestContext& ctx) {
  HUTCH_TRY(json message, parseMessage(ctx.request.body()));
  HUTCH_TRY(Selector sel, parseSelector(message));
  auto p = findProcess(state, boxOf(ctx), sel);
  if (!p) return fail(noSuchProcess(sel));
  return ProcessCall{std::move(message), std::move(p)};
}
}  // namespace

awaitable<Reply> processStart(box::BoxService& service, std::shared_ptr<State> state,
                              RequestContext& ctx) {
  auto message = streamRequest(ctx);
  if (!message) co_return rpcError(message.error());
  auto start = parseStartRequest(*message);
  if (!start) co_return rpcError(start.error());
  auto user = userOf(ctx, service);
  if (!user) co_return rpcError(user.error());
  const std::string& box = boxOf(ctx);
  auto agent = co_await service.agentFor(box, ctx.principal.actor());
  if (!agent) co_return rpcError(notRunning(agent.error(), box));

  proto::ExecRequest request;
  request.argv.push_back(start->process.cmd);
  for (const auto& a : start->process.args) request.argv.push_back(a);
  auto b = service.get(box);
  if (b) api::addBoxEnvironment(*b, request);
  for (const auto& [k, v] : start->process.envs) request.env.push_back(k + "=" + v);
  // None named: its template's last WORKDIR (envd's defaultWorkdir), else the user's home.
  request.cwd = start->process.cwd.value_or("");
  if (request.cwd.empty() && b) request.cwd = defaultWorkdirOf(*b);
  if (!request.cwd.empty() && !request.cwd.starts_with('/')) {
    // envd takes a relative cwd (and "~") from the user's home: the agent's stat of "." as the
    // user names it.
    proto::FileStatRequest home_request{.path = ".", .user = *user, .follow = true};
    auto home = co_await (*agent)->stat(std::move(home_request));
    if (!home) {
      // As a command that cannot start: the stream ends with the error.
      const Error error = home.error().withContext(fmt::format(
          "The working directory '{}' is taken from the home of {}", request.cwd, *user));
      EnvelopeStream failed(ctx);
      if (co_await failed.start()) co_await failed.finish(error);
      co_return std::nullopt;
    }
    request.cwd = resolveForUser(request.cwd, home->path);
  }
  request.user = *user;
  request.tty = start->tty;
  request.rows = start->rows;
  request.cols = start->cols;
  request.pipe_stdin = start->stdin || start->tty;
  if (auto valid = proto::validate(request); !valid) co_return rpcError(valid.error());

  EnvelopeStream stream(ctx);
  auto session = co_await (*agent)->exec(std::move(request));
  if (!session) {
    // The command could not start (no such program or directory, a bad user): the stream
    // ends with the error, as envd's does.
    if (!co_await stream.start()) co_return std::nullopt;
    co_await stream.finish(session.error());
    co_return std::nullopt;
  }
  auto p = std::make_shared<Process>(state->executor);
  p->session = *session;
  p->pid = static_cast<uint32_t>(p->session->pid());
  p->tag = start->tag;
  p->config = start->process;
  auto sub = std::make_shared<Subscriber>(state->executor);
  p->subscribers.push_back(sub);
  state->processes[box][p->pid] = p;
  std::optional<event::AsyncEvent::Clock::time_point> deadline;
  if (auto timeout = connectTimeout(ctx)) {
    deadline = event::AsyncEvent::Clock::now() + *timeout;
    // Connect-Timeout-Ms bounds the process's life, as envd's context does.
    p->deadline = std::make_unique<asio::steady_timer>(state->executor, *timeout);
    std::weak_ptr<Process> weak = p;
    p->deadline->async_wait([weak](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto live = weak.lock()) (void)live->session->signal(SIGKILL);
    });
  }
  asio::co_spawn(state->executor, pump(state, box, p), asio::detached);

  // Named, not temporaries inside co_await: GCC 12 miscompiles those.
  const json started = startEvent(p->pid);
  bool sent = co_await stream.start();
  if (sent) sent = co_await stream.send(started);
  if (!sent) {
    sub->gone = true;
    co_return std::nullopt;
  }
  co_await follow(ctx, stream, p, sub, deadline);
  co_return std::nullopt;
}

awaitable<Reply> processConnect(std::shared_ptr<State> state, RequestContext& ctx) {
  auto message = streamRequest(ctx);
  if (!message) co_return rpcError(message.error());
  auto sel = parseSelector(*message);
  if (!sel) co_return rpcError(sel.error());
  auto p = findProcess(*state, boxOf(ctx), *sel);
  if (!p) co_return rpcError(noSuchProcess(*sel));
  auto sub = std::make_shared<Subscriber>(state->executor);
  p->subscribers.push_back(sub);
  EnvelopeStream stream(ctx);
  // Named, not temporaries inside co_await: GCC 12 miscompiles those.
  const json started = startEvent(p->pid);
  bool sent = co_await stream.start();
  if (sent) sent = co_await stream.send(started);
  if (!sent) {
    sub->gone = true;
    co_return std::nullopt;
  }
  co_await follow(ctx, stream, p, sub);
  co_return std::nullopt;
}

awaitable<Reply> processList(std::shared_ptr<State> state, RequestContext& ctx) {
  json list = json::array();
  if (auto b = state->processes.find(boxOf(ctx)); b != state->processes.end()) {
    for (const auto& [pid, p] : b->second) {
      json info{{"config", toJson(p->config)}, {"pid", pid}};
      if (p->tag) info["tag"] = *p->tag;
      list.push_back(std::move(info));
    }
  }
  co_return jsonReply(http::status::ok, json{{"processes", list}});
}

awaitable<Reply> processSendInput(std::shared_ptr<State> state, RequestContext& ctx) {
  auto call = processCall(*state, ctx);
  if (!call) co_return rpcError(call.error());
  auto& [message, p] = *call;
  auto input = message.find("input");
  if (input == message.end() || !input->is_object()) {
    co_return rpcError(Error(Errc::kInvalidArgument, "SendInput needs 'input' (stdin or pty)"));
  }
  std::string encoded;
  if (auto in = input->find("stdin"); in != input->end() && in->is_string()) {
    encoded = in->get<std::string>();
  } else if (auto pty = input->find("pty"); pty != input->end() && pty->is_string()) {
    encoded = pty->get<std::string>();
  }
  auto bytes = api::base64Decode(encoded, "the input");
  if (!bytes) co_return rpcError(bytes.error());
  std::shared_ptr<guest::ExecSession> session = p->session;
  auto written = co_await session->writeStdin(*bytes);
  if (!written) co_return rpcError(written.error());
  co_return jsonReply(http::status::ok, json::object());
}

awaitable<Reply> processCloseStdin(std::shared_ptr<State> state, RequestContext& ctx) {
  auto call = processCall(*state, ctx);
  if (!call) co_return rpcError(call.error());
  auto& [message, p] = *call;
  if (auto closed = p->session->closeStdin(); !closed) co_return rpcError(closed.error());
  co_return jsonReply(http::status::ok, json::object());
}

awaitable<Reply> processSendSignal(std::shared_ptr<State> state, RequestContext& ctx) {
  auto call = processCall(*state, ctx);
  if (!call) co_return rpcError(call.error());
  auto& [message, p] = *call;
  auto signo = parseSignal(message.value("signal", json()));
  if (!signo) co_return rpcError(signo.error());
  if (auto sent = p->session->signal(*signo); !sent) co_return rpcError(sent.error());
  co_return jsonReply(http::status::ok, json::object());
}

awaitable<Reply> processUpdate(std::shared_ptr<State> state, RequestContext& ctx) {
  auto call = processCall(*state, ctx);
  if (!call) co_return rpcError(call.error());
  auto& [message, p] = *call;
  auto pty = message.find("pty");
  if (pty != message.end() && pty->is_object()) {
    json size = pty->value("size", json::object());
    auto rows = size.value("rows", 0);
    auto cols = size.value("cols", 0);
    if (rows < 0 || rows > 65535 || cols < 0 || cols > 65535) {
      co_return rpcError(Error(Errc::kInvalidArgument, "The pty size must be 0-65535"));
    }
    if (auto resized = p->session->resize(static_cast<uint16_t>(rows), static_cast<uint16_t>(cols));
        !resized) {
      co_return rpcError(resized.error());
    }
  }
  co_return jsonReply(http::status::ok, json::object());
}

}  // namespace hutch::e2b

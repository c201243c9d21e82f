#include "e2b/facade.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/string.hpp>
#include <csignal>
#include <deque>
#include <fstream>
#include <list>

#include "api/encoding.h"
#include "api/error_mapping.h"
#include "api/handlers.h"
#include "e2b/model.h"
#include "e2b/multipart.h"
#include "guest/agent_client.h"
#include "guest/async_event.h"
#include "guest/exec_session.h"
#include "guest/file_watch.h"
#include "guest/file_writer.h"

namespace hutch::e2b {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using api::RequestContext;
using api::Response;
using asio::awaitable;
using Reply = std::optional<Response>;

namespace {

constexpr size_t kMaxQueuedOutput = size_t{4} << 20;  // per subscriber, before the pump waits
constexpr size_t kMaxWatcherEvents = 10000;           // polled watchers keep at most these

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
  for (std::string_view prefix : {"/sandboxes", "/v2/sandboxes"}) {
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

// ---- streams of Connect envelopes ----

// A server stream's response: 200, application/connect+json, one chunk per envelope.
class EnvelopeStream {
 public:
  explicit EnvelopeStream(RequestContext& ctx) : ctx_(ctx), writer_(*ctx.connection) {}
  awaitable<bool> start() {
    co_return co_await writer_.start(http::status::ok, "application/connect+json");
  }
  awaitable<bool> send(const json& message) {
    const std::string framed = envelope(message.dump());
    co_return co_await writer_.write(framed);
  }
  awaitable<bool> sendText(std::string_view message) {
    const std::string framed = envelope(message);
    co_return co_await writer_.write(framed);
  }
  // The end-stream message ({} or {"error": ...}) and the last chunk; the connection may carry
  // the next request.
  awaitable<void> finish(const std::optional<Error>& error) {
    json end = json::object();
    if (error) end["error"] = connectError(*error);
    const std::string framed = envelope(end.dump(), kEndStreamFlag);
    bool ok = co_await writer_.write(framed);
    if (ok) ok = co_await writer_.finish();
    if (ok) ctx_.keep_alive = true;
  }

 private:
  RequestContext& ctx_;
  api::ChunkedWriter writer_;
};

// The one message of a streaming request (Content-Type application/connect+json).
Result<json> streamRequest(const RequestContext& ctx) {
  HUTCH_TRY(std::string message, singleEnvelope(ctx.request.body()));
  return parseMessage(message);
}

Result<std::string> userOf(const RequestContext& ctx) {
  const std::string header(ctx.request[http::field::authorization]);
  return userFromAuthorization(header);
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

}  // namespace

// ---- processes ----

// One process started through envd's Start: its output goes to every stream attached to it
// (Start's, then Connect's); it outlives them (envd's processes run until they exit or are
// killed) and leaves the table when it ends.
struct Subscriber {
  explicit Subscriber(const asio::any_io_executor& ex) : changed(ex) {}
  guest::AsyncEvent changed;
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
  guest::AsyncEvent drained;  // a subscriber's queue went down
  std::unique_ptr<asio::steady_timer> deadline;
};

struct Watcher {
  std::shared_ptr<guest::FileWatch> watch;
  std::string root;
  std::deque<json> events;  // polled watchers: events not yet fetched
  std::optional<Error> error;
};

struct Facade::State {
  asio::any_io_executor executor;
  // box id -> pid -> process
  std::map<std::string, std::map<uint32_t, std::shared_ptr<Process>>> processes;
  // box id -> watcher id -> watcher (CreateWatcher / GetWatcherEvents)
  std::map<std::string, std::map<std::string, std::shared_ptr<Watcher>>> watchers;
};

namespace {

using State = Facade::State;

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
      co_await p->drained.waitUntil(guest::AsyncEvent::Clock::now() + std::chrono::seconds(1));
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
                       std::optional<guest::AsyncEvent::Clock::time_point> deadline = {}) {
  const auto keepalive = keepaliveInterval(ctx);
  const json keepalive_message{{"event", {{"keepalive", json::object()}}}};
  while (true) {
    if (deadline && guest::AsyncEvent::Clock::now() >= *deadline) {
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
      auto wake = guest::AsyncEvent::Clock::now() + keepalive;
      if (deadline) wake = std::min(wake, *deadline);
      co_await sub->changed.waitUntil(wake);
      if (deadline && guest::AsyncEvent::Clock::now() >= *deadline) continue;
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

awaitable<Reply> processStart(box::BoxService& service, std::shared_ptr<State> state,
                              RequestContext& ctx) {
  auto message = streamRequest(ctx);
  if (!message) co_return rpcError(message.error());
  auto start = parseStartRequest(*message);
  if (!start) co_return rpcError(start.error());
  auto user = userOf(ctx);
  if (!user) co_return rpcError(user.error());
  const std::string& box = boxOf(ctx);
  auto agent = service.agentFor(box);
  if (!agent) co_return rpcError(notRunning(agent.error(), box));

  proto::ExecRequest request;
  request.argv.push_back(start->process.cmd);
  for (const auto& a : start->process.args) request.argv.push_back(a);
  if (auto b = service.get(box); b) api::addBoxEnvironment(*b, request);
  for (const auto& [k, v] : start->process.envs) request.env.push_back(k + "=" + v);
  request.cwd = start->process.cwd.value_or("");
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
  std::optional<guest::AsyncEvent::Clock::time_point> deadline;
  if (auto timeout = connectTimeout(ctx)) {
    deadline = guest::AsyncEvent::Clock::now() + *timeout;
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

// ---- filesystem ----

Result<std::string> pathField(const json& message, const char* name = "path");

// A filesystem RPC: its message, its user, the box's agent, and the message's "path" (unless
// `path_field` is null: Move names two).
struct FsCall {
  std::shared_ptr<guest::AgentClient> agent;
  std::string user;
  json message;
  std::string path;
};

Result<FsCall> fsCall(box::BoxService& service, const RequestContext& ctx,
                      const char* path_field = "path") {
  HUTCH_TRY(json message, parseMessage(ctx.request.body()));
  std::string path;
  if (path_field != nullptr) {
    HUTCH_TRY(path, pathField(message, path_field));
  }
  HUTCH_TRY(std::string user, userOf(ctx));
  auto agent = service.agentFor(boxOf(ctx));
  if (!agent) return fail(notRunning(agent.error(), boxOf(ctx)));
  return FsCall{*agent, std::move(user), std::move(message), std::move(path)};
}

Result<std::string> pathField(const json& message, const char* name) {
  auto it = message.find(name);
  if (it == message.end() || !it->is_string() || it->get<std::string>().empty()) {
    return fail(Errc::kInvalidArgument, fmt::format("The request needs '{}'", name));
  }
  return it->get<std::string>();
}

awaitable<Reply> fsStat(box::BoxService& service, RequestContext& ctx) {
  auto call = fsCall(service, ctx);
  if (!call) co_return rpcError(call.error());
  const std::string& path = call->path;
  // Requests are named, never temporaries inside co_await: GCC 12 destroys those twice.
  proto::FileStatRequest request{.path = path, .user = call->user, .follow = false};
  auto info = co_await call->agent->stat(std::move(request));
  if (!info) co_return rpcError(info.error());
  co_return jsonReply(http::status::ok, json{{"entry", entryJson(*info)}});
}

awaitable<Reply> fsListDir(box::BoxService& service, RequestContext& ctx) {
  auto call = fsCall(service, ctx);
  if (!call) co_return rpcError(call.error());
  const std::string& path = call->path;
  int64_t depth = 1;
  if (auto d = call->message.find("depth"); d != call->message.end() && d->is_number_integer()) {
    depth = d->get<int64_t>();
  }
  if (depth < 1 || depth > 32) {
    co_return rpcError(Error(Errc::kInvalidArgument, "depth must be 1-32"));
  }
  proto::FileListRequest request{
      .path = path, .user = call->user, .depth = static_cast<uint32_t>(depth)};
  auto list = co_await call->agent->listDir(std::move(request));
  if (!list) co_return rpcError(list.error());
  json entries = json::array();
  for (const auto& e : list->entries) entries.push_back(entryJson(e));
  co_return jsonReply(http::status::ok, json{{"entries", entries}});
}

awaitable<Reply> fsMakeDir(box::BoxService& service, RequestContext& ctx) {
  auto call = fsCall(service, ctx);
  if (!call) co_return rpcError(call.error());
  const std::string& path = call->path;
  proto::FileMkdirRequest request{.path = path, .user = call->user};
  auto made = co_await call->agent->makeDir(std::move(request));
  if (!made) co_return rpcError(made.error());
  if (!made->created) {
    co_return rpcError(
        Error(Errc::kAlreadyExists, fmt::format("directory {} already exists", made->entry.path)));
  }
  co_return jsonReply(http::status::ok, json{{"entry", entryJson(made->entry)}});
}

awaitable<Reply> fsMove(box::BoxService& service, RequestContext& ctx) {
  auto call = fsCall(service, ctx, nullptr);
  if (!call) co_return rpcError(call.error());
  auto from = pathField(call->message, "source");
  if (!from) co_return rpcError(from.error());
  auto to = pathField(call->message, "destination");
  if (!to) co_return rpcError(to.error());
  proto::FileMoveRequest request{.from = *from, .to = *to, .user = call->user, .overwrite = true};
  auto moved = co_await call->agent->move(std::move(request));
  if (!moved) co_return rpcError(moved.error());
  co_return jsonReply(http::status::ok, json{{"entry", entryJson(*moved)}});
}

awaitable<Reply> fsRemove(box::BoxService& service, RequestContext& ctx) {
  auto call = fsCall(service, ctx);
  if (!call) co_return rpcError(call.error());
  const std::string& path = call->path;
  proto::FileRemoveRequest request{.path = path, .user = call->user, .recursive = true};
  auto removed = co_await call->agent->remove(std::move(request));
  if (!removed) co_return rpcError(removed.error());
  co_return jsonReply(http::status::ok, json::object());
}

// A watch event as envd's FilesystemEvent: the name relative to the watched directory.
std::optional<json> watchEvent(const std::string& root, const proto::FileEvent& e) {
  static constexpr const char* kTypes[] = {"EVENT_TYPE_CREATE", "EVENT_TYPE_WRITE",
                                           "EVENT_TYPE_REMOVE", "EVENT_TYPE_RENAME",
                                           "EVENT_TYPE_CHMOD"};
  if (isWriteTemporary(e.path)) return std::nullopt;
  std::string name = e.path;
  const std::string prefix = root == "/" ? root : root + "/";
  if (name.starts_with(prefix)) name = name.substr(prefix.size());
  if (name.empty()) return std::nullopt;
  return json{{"name", name}, {"type", kTypes[static_cast<int>(e.type)]}};
}

Result<std::pair<std::string, bool>> watchRequest(const json& message) {
  HUTCH_TRY(std::string path, pathField(message));
  bool recursive = false;
  if (auto r = message.find("recursive"); r != message.end() && r->is_boolean()) {
    recursive = r->get<bool>();
  }
  return std::make_pair(std::move(path), recursive);
}

awaitable<Reply> fsWatchDir(box::BoxService& service, RequestContext& ctx) {
  auto message = streamRequest(ctx);
  if (!message) co_return rpcError(message.error());
  auto request = watchRequest(*message);
  if (!request) co_return rpcError(request.error());
  auto user = userOf(ctx);
  if (!user) co_return rpcError(user.error());
  auto agent = service.agentFor(boxOf(ctx));
  if (!agent) co_return rpcError(notRunning(agent.error(), boxOf(ctx)));
  proto::WatchRequest watch_request{
      .path = request->first, .user = *user, .recursive = request->second};
  auto watch = co_await (*agent)->watch(std::move(watch_request));
  if (!watch) co_return rpcError(watch.error());
  std::shared_ptr<guest::FileWatch> w = *watch;
  const std::string root = w->info().path;
  EnvelopeStream stream(ctx);
  // WatchDirResponse's oneof is the message itself (no "event" wrapper, unlike processes').
  const json started{{"start", json::object()}};
  const json keepalive_event{{"keepalive", json::object()}};
  bool sent = co_await stream.start();
  if (sent) sent = co_await stream.send(started);
  if (!sent) {
    w->close();
    co_return std::nullopt;
  }
  // Events as they come; a client gone is seen at the next write (or keepalive).
  const auto keepalive = keepaliveInterval(ctx);
  asio::steady_timer ticker(ctx.connection->stream.get_executor());
  auto pending = std::make_shared<std::deque<Result<std::optional<proto::FileEvents>>>>();
  auto changed = std::make_shared<guest::AsyncEvent>(ctx.connection->stream.get_executor());
  auto reading = std::make_shared<bool>(true);
  asio::co_spawn(
      ctx.connection->stream.get_executor(),
      [w, pending, changed, reading]() -> awaitable<void> {
        while (*reading) {
          auto next = co_await w->next();
          bool last = !next || !*next;
          pending->push_back(std::move(next));
          changed->notify();
          if (last) break;
        }
      },
      asio::detached);
  std::optional<Error> ended;
  while (true) {
    if (pending->empty()) {
      co_await changed->waitUntil(guest::AsyncEvent::Clock::now() + keepalive);
      if (pending->empty()) {
        if (!co_await stream.send(keepalive_event)) break;
        continue;
      }
    }
    auto next = std::move(pending->front());
    pending->pop_front();
    if (!next) {
      ended = next.error();
      break;
    }
    if (!*next) break;
    bool ok = true;
    for (const auto& e : (*next)->events) {
      auto event = watchEvent(root, e);
      if (!event) continue;
      const json message{{"filesystem", *event}};
      if (!co_await stream.send(message)) {
        ok = false;
        break;
      }
    }
    if (!ok) {
      *reading = false;
      w->close();
      co_return std::nullopt;
    }
  }
  *reading = false;
  w->close();
  co_await stream.finish(ended);
  co_return std::nullopt;
}

awaitable<void> collectWatcher(std::shared_ptr<Watcher> watcher) {
  while (true) {
    auto next = co_await watcher->watch->next();
    if (!next) {
      watcher->error = next.error();
      co_return;
    }
    if (!*next) co_return;
    for (const auto& e : (*next)->events) {
      if (auto event = watchEvent(watcher->root, e)) {
        if (watcher->events.size() < kMaxWatcherEvents) watcher->events.push_back(*event);
      }
    }
  }
}

awaitable<Reply> fsCreateWatcher(box::BoxService& service, std::shared_ptr<State> state,
                                 RequestContext& ctx) {
  auto call = fsCall(service, ctx);
  if (!call) co_return rpcError(call.error());
  auto request = watchRequest(call->message);
  if (!request) co_return rpcError(request.error());
  proto::WatchRequest watch_request{
      .path = request->first, .user = call->user, .recursive = request->second};
  auto watch = co_await call->agent->watch(std::move(watch_request));
  if (!watch) co_return rpcError(watch.error());
  auto watcher = std::make_shared<Watcher>();
  watcher->watch = *watch;
  watcher->root = watcher->watch->info().path;
  const std::string id = box::randomId();
  state->watchers[boxOf(ctx)][id] = watcher;
  asio::co_spawn(state->executor, collectWatcher(watcher), asio::detached);
  co_return jsonReply(http::status::ok, json{{"watcherId", id}});
}

std::shared_ptr<Watcher> findWatcher(State& state, const std::string& box, const json& message) {
  auto b = state.watchers.find(box);
  if (b == state.watchers.end()) return nullptr;
  auto it = b->second.find(message.value("watcherId", ""));
  return it == b->second.end() ? nullptr : it->second;
}

awaitable<Reply> fsGetWatcherEvents(std::shared_ptr<State> state, RequestContext& ctx) {
  auto message = parseMessage(ctx.request.body());
  if (!message) co_return rpcError(message.error());
  auto watcher = findWatcher(*state, boxOf(ctx), *message);
  if (!watcher) co_return rpcError(Error(Errc::kNotFound, "No such watcher"));
  json events = json::array();
  while (!watcher->events.empty()) {
    events.push_back(std::move(watcher->events.front()));
    watcher->events.pop_front();
  }
  if (events.empty() && watcher->error) co_return rpcError(*watcher->error);
  co_return jsonReply(http::status::ok, json{{"events", events}});
}

awaitable<Reply> fsRemoveWatcher(std::shared_ptr<State> state, RequestContext& ctx) {
  auto message = parseMessage(ctx.request.body());
  if (!message) co_return rpcError(message.error());
  auto watcher = findWatcher(*state, boxOf(ctx), *message);
  if (!watcher) co_return rpcError(Error(Errc::kNotFound, "No such watcher"));
  watcher->watch->close();
  state->watchers[boxOf(ctx)].erase(message->value("watcherId", ""));
  co_return jsonReply(http::status::ok, json::object());
}

// ---- /files and /health ----

Result<std::string> fileUser(const RequestContext& ctx) {
  if (auto u = ctx.query.find("username"); u != ctx.query.end() && !u->second.empty()) {
    return u->second;
  }
  return userOf(ctx);
}

awaitable<Reply> filesGet(box::BoxService& service, RequestContext& ctx) {
  auto path = ctx.query.find("path");
  if (path == ctx.query.end() || path->second.empty()) {
    co_return envdError(Error(Errc::kInvalidArgument, "GET /files needs ?path="));
  }
  auto user = fileUser(ctx);
  if (!user) co_return envdError(user.error());
  auto agent = service.agentFor(boxOf(ctx));
  if (!agent) co_return envdError(notRunning(agent.error(), boxOf(ctx)));
  proto::FileReadRequest request{.path = path->second, .user = *user};
  auto opened = co_await (*agent)->openRead(std::move(request));
  if (!opened) co_return envdError(opened.error());
  co_return co_await api::sendFile(*opened, ctx, boxOf(ctx));
}

// Writes one uploaded file: the parts of its content as they arrive.
class Upload {
 public:
  Upload(std::shared_ptr<guest::AgentClient> agent, std::string user)
      : agent_(std::move(agent)), user_(std::move(user)) {}
  awaitable<Result<>> start(const std::string& path) {
    proto::FileWriteRequest request{.path = path, .user = user_, .parents = true};
    auto opened = co_await agent_->openWrite(std::move(request));
    if (!opened) co_return fail(opened.error());
    writer_ = *opened;
    co_return ok();
  }
  awaitable<Result<>> write(std::string_view data) {
    if (data.empty()) co_return ok();
    co_return co_await writer_->write(data);
  }
  awaitable<Result<proto::FileInfo>> finish() {
    auto w = std::move(writer_);
    co_return co_await w->finish();
  }
  void abort() {
    if (writer_) writer_->abort();
    writer_.reset();
  }
  bool isOpen() const { return writer_ != nullptr; }

 private:
  std::shared_ptr<guest::AgentClient> agent_;
  std::string user_;
  std::shared_ptr<guest::FileWriter> writer_;
};

json writtenJson(const proto::FileInfo& info) {
  return json{{"name", info.name}, {"type", "file"}, {"path", info.path}};
}

awaitable<Reply> filesPost(box::BoxService& service, RequestContext& ctx) {
  auto user = fileUser(ctx);
  if (!user) co_return envdError(user.error());
  auto agent = service.agentFor(boxOf(ctx));
  if (!agent) co_return envdError(notRunning(agent.error(), boxOf(ctx)));
  std::optional<std::string> query_path;
  if (auto p = ctx.query.find("path"); p != ctx.query.end() && !p->second.empty()) {
    query_path = p->second;
  }
  const std::string content_type(ctx.request[http::field::content_type]);
  json written = json::array();
  Upload upload(*agent, *user);
  auto failWith = [&](const Error& error) {
    upload.abort();
    return envdError(error.withContext("The upload stopped; files before it were written"));
  };
  if (!content_type.starts_with("multipart/form-data")) {
    // A raw body (application/octet-stream): the file at ?path=.
    if (!query_path) {
      co_return envdError(
          Error(Errc::kInvalidArgument, "An octet-stream upload needs ?path= for the file"));
    }
    auto opened = co_await upload.start(*query_path);
    if (!opened) {
      co_return envdError(opened.error());
    }
    while (true) {
      auto chunk = co_await ctx.body->read();
      if (!chunk) co_return failWith(chunk.error());
      if (chunk->empty()) break;
      auto w = co_await upload.write(*chunk);
      if (!w) co_return failWith(w.error());
    }
    auto info = co_await upload.finish();
    if (!info) co_return envdError(info.error());
    written.push_back(writtenJson(*info));
    co_return jsonReply(http::status::ok, written);
  }
  auto boundary = multipartBoundary(content_type);
  if (!boundary) co_return envdError(boundary.error());
  MultipartReader parts(*boundary);
  bool body_done = false;
  // if/else, not a switch: GCC 12 mishandles co_await inside switch cases.
  while (true) {
    auto event = parts.next();
    if (!event) co_return failWith(event.error());
    const auto kind = event->kind;
    if (kind == MultipartReader::Event::kNeedMore) {
      if (body_done) {
        co_return failWith(
            Error(Errc::kInvalidArgument, "The multipart body ended before its closing boundary"));
      }
      auto chunk = co_await ctx.body->read();
      if (!chunk) co_return failWith(chunk.error());
      if (chunk->empty()) body_done = true;
      parts.feed(*chunk);
    } else if (kind == MultipartReader::Event::kPartStart) {
      // The part's filename is the file's path when the query names none (several files in
      // one request, E2B's writeFiles).
      std::string path = query_path.value_or(event->filename);
      if (path.empty()) {
        co_return failWith(
            Error(Errc::kInvalidArgument, "A part has no filename and the request no ?path="));
      }
      auto opened = co_await upload.start(path);
      if (!opened) co_return failWith(opened.error());
    } else if (kind == MultipartReader::Event::kData) {
      if (upload.isOpen()) {
        auto w = co_await upload.write(event->data);
        if (!w) co_return failWith(w.error());
      }
    } else if (kind == MultipartReader::Event::kPartEnd) {
      if (upload.isOpen()) {
        auto info = co_await upload.finish();
        if (!info) co_return envdError(info.error());
        written.push_back(writtenJson(*info));
      }
    } else {
      // The closing boundary; an epilogue after it is read and dropped.
      while (!body_done) {
        auto chunk = co_await ctx.body->read();
        if (!chunk || chunk->empty()) break;
      }
      co_return jsonReply(http::status::ok, written);
    }
  }
}

awaitable<Reply> health(box::BoxService& service, RequestContext& ctx) {
  auto agent = service.agentFor(boxOf(ctx));
  if (!agent) co_return envdError(notRunning(agent.error(), boxOf(ctx)));
  co_return noContent();
}

// ---- control plane ----

uint64_t diskMib(const box::Box& b) {
  if (b.config.disk_mib != 0) return b.config.disk_mib;
  std::error_code ec;
  auto size = std::filesystem::file_size(std::filesystem::path(b.image_dir) / "rootfs.img", ec);
  return ec ? 0 : size >> 20;
}

// network.allowOut / denyOut as hutch's egress policy (docs/e2b.md): domains only; denying
// 0.0.0.0/0 means "nothing but allowOut".
Result<std::string> policyFor(const NewSandbox& spec) {
  if (!spec.allow_internet_access && spec.allow_out.empty()) return std::string("none");
  if (spec.allow_out.empty() && spec.deny_out.empty()) return std::string();
  json allow = json::array();
  json deny = json::array();
  bool deny_all = !spec.allow_internet_access;
  auto isNetwork = [](const std::string& s) {
    return s.find('/') != std::string::npos ||
           s.find_first_not_of("0123456789.:") == std::string::npos;
  };
  for (const auto& d : spec.deny_out) {
    if (d == "0.0.0.0/0" || d == "::/0") {
      deny_all = true;
    } else if (isNetwork(d)) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("denyOut '{}': hutch's egress rules name domains; of address "
                              "ranges only 0.0.0.0/0 (everything) is understood",
                              d));
    } else {
      deny.push_back({{"domain", d}});
    }
  }
  for (const auto& a : spec.allow_out) {
    if (isNetwork(a)) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("allowOut '{}': hutch's egress rules name domains, not addresses "
                              "(see docs/network.md)",
                              a));
    }
    allow.push_back({{"domain", a}});
  }
  if (!deny_all) allow.push_back({{"domain", "*"}});
  return json{{"allow", allow}, {"deny", deny}}.dump();
}

awaitable<Reply> createSandbox(box::BoxService& service, const FacadeOptions& options,
                               RequestContext& ctx) {
  auto spec = parseNewSandbox(ctx.request.body());
  if (!spec) co_return controlError(spec.error());
  box::BoxSpec box_spec;
  box_spec.config.template_name = mapTemplate(options.templates, spec->template_id);
  box_spec.env = spec->env;
  box_spec.metadata = spec->metadata;
  box_spec.metadata[std::string(kTemplateMetadataKey)] = spec->template_id;
  box_spec.owner = ctx.principal.owner();
  if (spec->timeout_s > 0) {
    box_spec.expires_at = box::unixNow() + spec->timeout_s;
    box_spec.on_expiry = spec->auto_pause ? box::Expiry::kStop : box::Expiry::kRemove;
  }
  auto policy = policyFor(*spec);
  if (!policy) co_return controlError(policy.error());
  box_spec.network_policy = *policy;
  auto created = co_await service.create(std::move(box_spec));
  if (!created) co_return controlError(created.error());
  co_return jsonReply(http::status::created, sandboxJson(*created, spec->template_id,
                                                         accessToken(options.secret, created->id)));
}

awaitable<Reply> getSandbox(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  co_return jsonReply(http::status::ok, sandboxDetailJson(*b, templateIdOf(*b), diskMib(*b)));
}

// ?metadata=k1%3Dv1%26k2%3Dv2 (one URL-encoded query string), E2B's list filter.
std::map<std::string, std::string> metadataFilter(const api::PathParams& query) {
  std::map<std::string, std::string> out;
  auto it = query.find("metadata");
  if (it == query.end() || it->second.empty()) return out;
  for (const auto& [k, v] : api::parseQuery(it->second)) out[k] = v;
  return out;
}

awaitable<Reply> listSandboxes(box::BoxService& service, RequestContext& ctx) {
  auto boxes = service.list(api::ownerFilter(ctx.principal));
  if (!boxes) co_return controlError(boxes.error());
  auto filter = metadataFilter(ctx.query);
  std::vector<std::string> states;
  if (auto s = ctx.query.find("state"); s != ctx.query.end() && !s->second.empty()) {
    std::string list = s->second;
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      if (comma > start) states.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  size_t limit = 1000;
  if (auto l = ctx.query.find("limit"); l != ctx.query.end() && !l->second.empty()) {
    try {
      limit = std::clamp<size_t>(std::stoul(l->second), 1, 1000);
    } catch (const std::exception&) {
      co_return controlError(Error(Errc::kInvalidArgument, "limit must be a number 1-1000"));
    }
  }
  std::string after;
  if (auto t = ctx.query.find("nextToken"); t != ctx.query.end()) after = t->second;
  std::sort(boxes->begin(), boxes->end(),
            [](const box::Box& a, const box::Box& b) { return a.id < b.id; });
  json items = json::array();
  std::string next;
  for (const auto& b : *boxes) {
    if (!after.empty() && b.id <= after) continue;
    bool match = true;
    for (const auto& [k, v] : filter) {
      auto m = b.metadata.find(k);
      if (m == b.metadata.end() || m->second != v) match = false;
    }
    if (!states.empty() &&
        std::find(states.begin(), states.end(), sandboxState(b)) == states.end()) {
      match = false;
    }
    if (!match) continue;
    if (items.size() == limit) {
      next = items.back()["sandboxID"].get<std::string>();
      break;
    }
    items.push_back(sandboxDetailJson(b, templateIdOf(b), diskMib(b)));
  }
  Response res = jsonReply(http::status::ok, items);
  if (!next.empty()) res.set("X-Next-Token", next);
  co_return res;
}

awaitable<Reply> killSandbox(box::BoxService& service, RequestContext& ctx) {
  auto removed = co_await service.remove(boxOf(ctx), true);
  if (!removed) co_return controlError(removed.error());
  co_return noContent();
}

awaitable<Reply> setSandboxTimeout(box::BoxService& service, RequestContext& ctx) {
  auto timeout = parseTimeoutBody(ctx.request.body(), true);
  if (!timeout) co_return controlError(timeout.error());
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  box::Expiry action = b->on_expiry == box::Expiry::kNone ? box::Expiry::kRemove : b->on_expiry;
  auto set = service.setLifetime(b->id, **timeout == 0 ? 0 : box::unixNow() + **timeout, action);
  if (!set) co_return controlError(set.error());
  co_return noContent();
}

awaitable<Reply> connectSandbox(box::BoxService& service, const FacadeOptions& options,
                                RequestContext& ctx) {
  auto timeout = parseTimeoutBody(ctx.request.body(), false);
  if (!timeout) co_return controlError(timeout.error());
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  http::status status = http::status::ok;
  if (b->state == box::BoxState::kStopped || b->state == box::BoxState::kFailed) {
    auto started = co_await service.start(b->id);
    if (!started) co_return controlError(started.error());
    b = std::move(started);
    status = http::status::created;
  }
  if (*timeout) {
    box::Expiry action = b->on_expiry == box::Expiry::kNone ? box::Expiry::kRemove : b->on_expiry;
    auto set = service.setLifetime(b->id, box::unixNow() + **timeout, action);
    if (!set) co_return controlError(set.error());
  }
  co_return jsonReply(status,
                      sandboxJson(*b, templateIdOf(*b), accessToken(options.secret, b->id)));
}

awaitable<Reply> pauseSandbox(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  if (b->state != box::BoxState::kRunning) {
    co_return controlError(
        Error(Errc::kAlreadyExists, fmt::format("The sandbox {} is already paused", b->id)));
  }
  auto stopped = co_await service.stop(b->id);
  if (!stopped) co_return controlError(stopped.error());
  co_return noContent();
}

awaitable<Reply> sandboxMetrics(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  json samples = json::array();
  if (auto usage = service.usage(b->id); usage) {
    samples.push_back({{"timestamp", rfc3339(box::unixNow())},
                       {"timestampUnix", box::unixNow()},
                       {"cpuCount", b->config.cpus},
                       {"cpuUsedPct", 0.0},
                       {"memUsed", usage->memory_bytes},
                       {"memTotal", b->config.memory_mib << 20},
                       {"diskUsed", 0},
                       {"diskTotal", diskMib(*b) << 20}});
  }
  co_return jsonReply(http::status::ok, samples);
}

awaitable<Reply> forkSandbox(box::BoxService& service, const FacadeOptions& options,
                             RequestContext& ctx) {
  auto message = parseMessage(ctx.request.body());
  if (!message) co_return controlError(message.error());
  int64_t count = message->value("count", 1);
  if (count < 1 || count > 16) {
    co_return controlError(Error(Errc::kInvalidArgument, "count must be 1-16"));
  }
  box::ForkSpec spec{.count = static_cast<unsigned>(count)};
  auto children = co_await service.fork(boxOf(ctx), std::move(spec));
  if (!children) co_return controlError(children.error());
  json out = json::array();
  for (const auto& child : *children) {
    out.push_back({{"sandbox", sandboxJson(child, templateIdOf(child),
                                           accessToken(options.secret, child.id))}});
  }
  co_return jsonReply(http::status::created, out);
}

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

Facade::Facade(asio::any_io_executor executor, box::BoxService& service, FacadeOptions options)
    : service_(service), options_(std::move(options)), state_(std::make_shared<State>()) {
  state_->executor = std::move(executor);
  using http::verb;
  auto& s = service_;
  auto st = state_;
  const FacadeOptions& o = options_;
  // Control plane: E2B's paths, with {box} for the sandbox id (hutch's scoper resolves it).
  for (const char* prefix : {"", "/v2"}) {
    const std::string p = prefix;
    control_.add(verb::post, p + "/sandboxes",
                 route([&s, &o](RequestContext& ctx) { return createSandbox(s, o, ctx); }));
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
  control_.add(verb::post, "/sandboxes/{box}/fork",
               route([&s, &o](RequestContext& ctx) { return forkSandbox(s, o, ctx); }));

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
    // A signed /files URL: the signature stands for the token (E2B's signature.ts).
    auto signatureMatches = [&](const box::Box& b) {
      auto sig = query.find("signature");
      auto path = query.find("path");
      if (sig == query.end() || path == query.end()) return false;
      std::optional<int64_t> expiration;
      if (auto exp = query.find("signature_expiration");
          exp != query.end() && !exp->second.empty()) {
        try {
          expiration = std::stoll(exp->second);
        } catch (const std::exception&) {
          return false;
        }
        if (*expiration < box::unixNow()) return false;
      }
      std::string user;
      if (auto u = query.find("username"); u != query.end()) user = u->second;
      const char* op = header.method() == http::verb::get ? "read" : "write";
      const std::string t = accessToken(secret, b.id);
      return sameToken(sig->second, fileSignature(path->second, op, user, t, expiration)) ||
             (user.empty() &&
              sameToken(sig->second, fileSignature(path->second, op, kDefaultUser, t, expiration)));
    };
    if (!id.empty()) {
      auto b = service.get(id);
      if (!b) {
        return fail(Errc::kUnavailable, fmt::format("The sandbox {} was not found", id));
      }
      if (!tokenMatches(*b) && !signatureMatches(*b)) {
        return fail(Errc::kUnauthenticated,
                    token.empty() ? "Missing X-Access-Token (the envdAccessToken of the sandbox)"
                                  : "Wrong X-Access-Token for this sandbox");
      }
      found = std::move(*b);
    } else {
      // No routing header (E2B SDKs before 2.14.1 on /files, signed URLs): the sandbox whose
      // token or signature this is.
      auto boxes = service.list();
      if (boxes) {
        for (auto& b : *boxes) {
          if ((!token.empty() && tokenMatches(b)) || (token.empty() && signatureMatches(b))) {
            found = std::move(b);
            break;
          }
        }
      }
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

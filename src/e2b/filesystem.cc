// envd's filesystem service (filesystem.Filesystem: stat, list, make, move, remove, watch) and
// its HTTP endpoints, /files and /health.

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <cctype>
#include <deque>

#include "api/encoding.h"
#include "api/handlers.h"
#include "e2b/facade_internal.h"
#include "e2b/gunzip.h"
#include "e2b/multipart.h"
#include "guest/agent_client.h"
#include "guest/file_reader.h"
#include "guest/file_watch.h"
#include "guest/file_writer.h"

namespace hutch::e2b {

using api::RequestContext;
using api::Response;
using asio::awaitable;

struct Watcher {
  std::shared_ptr<guest::FileWatch> watch;
  std::string root;
  std::deque<json> events;  // polled watchers: events not yet fetched
  std::optional<Error> error;
};

namespace {

constexpr size_t kMaxWatcherEvents = 10000;  // polled watchers keep at most these

// ---- filesystem ----

Result<std::string> pathField(const json& message, const char* name = "path");

// A filesystem RPC: its message, its user, the box's agent, and the message's "path" (unless
// `path_field` is null: Move names two).
struct FsCall {
  std::shared_ptr<box::BoxAgent> agent;
  std::string user;
  json message;
  std::string path;
};

awaitable<Result<FsCall>> fsCall(box::BoxService& service, const RequestContext& ctx,
                                 const char* path_field = "path") {
  HUTCH_CO_TRY(json message, parseMessage(ctx.request.body()));
  std::string path;
  if (path_field != nullptr) {
    HUTCH_CO_TRY(path, pathField(message, path_field));
  }
  HUTCH_CO_TRY(std::string user, userOf(ctx, service));
  auto agent = co_await service.agentFor(boxOf(ctx), ctx.principal.actor());
  if (!agent) co_return fail(notRunning(agent.error(), boxOf(ctx)));
  co_return FsCall{*agent, std::move(user), std::move(message), std::move(path)};
}

Result<std::string> pathField(const json& message, const char* name) {
  auto it = message.find(name);
  if (it == message.end() || !it->is_string() || it->get<std::string>().empty()) {
    return fail(Errc::kInvalidArgument, fmt::format("The request needs '{}'", name));
  }
  return it->get<std::string>();
}
}  // namespace

awaitable<Reply> fsStat(box::BoxService& service, RequestContext& ctx) {
  auto call = co_await fsCall(service, ctx);
  if (!call) co_return rpcError(call.error());
  const std::string& path = call->path;
  // Requests are named, never temporaries inside co_await: GCC 12 destroys those twice.
  proto::FileStatRequest request{.path = path, .user = call->user, .follow = false};
  auto info = co_await call->agent->stat(std::move(request));
  if (!info) co_return rpcError(info.error());
  co_return jsonReply(http::status::ok, json{{"entry", entryJson(*info)}});
}

awaitable<Reply> fsListDir(box::BoxService& service, RequestContext& ctx) {
  auto call = co_await fsCall(service, ctx);
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
  auto call = co_await fsCall(service, ctx);
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
  auto call = co_await fsCall(service, ctx, nullptr);
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
  auto call = co_await fsCall(service, ctx);
  if (!call) co_return rpcError(call.error());
  const std::string& path = call->path;
  proto::FileRemoveRequest request{.path = path, .user = call->user, .recursive = true};
  auto removed = co_await call->agent->remove(std::move(request));
  // envd's Remove is os.RemoveAll: a path that is not there is removed already.
  if (!removed && removed.error().code() != Errc::kNotFound) co_return rpcError(removed.error());
  co_return jsonReply(http::status::ok, json::object());
}
namespace {

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
}  // namespace

awaitable<Reply> fsWatchDir(box::BoxService& service, RequestContext& ctx) {
  auto message = streamRequest(ctx);
  if (!message) co_return rpcError(message.error());
  auto request = watchRequest(*message);
  if (!request) co_return rpcError(request.error());
  auto user = userOf(ctx, service);
  if (!user) co_return rpcError(user.error());
  auto agent = co_await service.agentFor(boxOf(ctx), ctx.principal.actor());
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
  auto changed = std::make_shared<event::AsyncEvent>(ctx.connection->stream.get_executor());
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
      co_await changed->waitUntil(event::AsyncEvent::Clock::now() + keepalive);
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
namespace {

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
}  // namespace

awaitable<Reply> fsCreateWatcher(box::BoxService& service, std::shared_ptr<State> state,
                                 RequestContext& ctx) {
  auto call = co_await fsCall(service, ctx);
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
namespace {

std::shared_ptr<Watcher> findWatcher(State& state, const std::string& box, const json& message) {
  auto b = state.watchers.find(box);
  if (b == state.watchers.end()) return nullptr;
  auto it = b->second.find(message.value("watcherId", ""));
  return it == b->second.end() ? nullptr : it->second;
}
}  // namespace

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
namespace {

// ---- /files and /health ----

Result<std::string> fileUser(const RequestContext& ctx, box::BoxService& service) {
  if (auto u = ctx.query.find("username"); u != ctx.query.end() && !u->second.empty()) {
    return u->second;
  }
  return userOf(ctx, service);
}
}  // namespace

awaitable<Reply> filesGet(box::BoxService& service, RequestContext& ctx) {
  auto path = ctx.query.find("path");
  if (path == ctx.query.end() || path->second.empty()) {
    co_return envdError(Error(Errc::kInvalidArgument, "GET /files needs ?path="));
  }
  auto user = fileUser(ctx, service);
  if (!user) co_return envdError(user.error());
  auto agent = co_await service.agentFor(boxOf(ctx), ctx.principal.actor());
  if (!agent) co_return envdError(notRunning(agent.error(), boxOf(ctx)));
  proto::FileReadRequest request{.path = path->second, .user = *user};
  auto opened = co_await (*agent)->openRead(std::move(request));
  if (!opened) co_return envdError(opened.error());
  co_return co_await api::sendFile(*opened, ctx, boxOf(ctx));
}
namespace {

// The box's /etc/passwd entry of `user` (read as root), or nullopt.
awaitable<std::optional<PasswdEntry>> boxUser(box::BoxAgent& agent, const std::string& user) {
  constexpr size_t kMaxPasswd = size_t{4} << 20;
  proto::FileReadRequest request{.path = "/etc/passwd", .user = "root"};
  auto reader = co_await agent.openRead(std::move(request));
  if (!reader) co_return std::nullopt;
  std::string text;
  while (text.size() < kMaxPasswd) {
    auto chunk = co_await (*reader)->next();
    if (!chunk) co_return std::nullopt;
    if (!*chunk) break;
    text += **chunk;
  }
  co_return passwdEntry(text, user);
}

// Writes one uploaded file: the parts of its content as they arrive.
class Upload {
 public:
  Upload(std::shared_ptr<box::BoxAgent> agent, std::string user)
      : agent_(std::move(agent)), user_(std::move(user)) {}
  awaitable<Result<>> start(const std::string& path) {
    proto::FileWriteRequest request{.path = path, .user = user_, .parents = true};
    auto opened = co_await agent_->openWrite(std::move(request));
    if (!opened && opened.error().code() == Errc::kPermissionDenied) {
      // envd (root) makes the missing directories of an upload and gives them to the user,
      // wherever they are: the same here, and nothing more (a directory that is there keeps
      // its permissions, and so does a file).
      auto made = co_await writeIntoNewDirectories(path);
      if (made) opened = std::move(*made);
    }
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
  // The write as root, owned by the user, when the file's directory does not exist: the agent
  // makes the missing directories and gives them to the file's owner. nullopt when that is
  // not the case (the user's own refusal stands).
  awaitable<std::optional<Result<std::shared_ptr<guest::FileWriter>>>> writeIntoNewDirectories(
      const std::string& path) {
    if (user_ == "root") co_return std::nullopt;
    auto entry = co_await boxUser(*agent_, user_);
    if (!entry) co_return std::nullopt;
    const std::string absolute = resolveForUser(path, entry->home);
    const std::string dir = cleanPath(absolute + "/..");
    proto::FileStatRequest probe{.path = dir, .user = "root", .follow = true};
    auto there = co_await agent_->stat(std::move(probe));
    if (there || there.error().code() != Errc::kNotFound) co_return std::nullopt;
    proto::FileWriteRequest request{.path = absolute,
                                    .user = "root",
                                    .owner = entry->name,
                                    .group = std::to_string(entry->gid),
                                    .parents = true};
    co_return co_await agent_->openWrite(std::move(request));
  }

  std::shared_ptr<box::BoxAgent> agent_;
  std::string user_;
  std::shared_ptr<guest::FileWriter> writer_;
};

// An upload's body as it arrives, inflated when it came with Content-Encoding: gzip (envd
// stores the file itself, not its gzip).
class UploadBody {
 public:
  explicit UploadBody(RequestContext& ctx) : ctx_(ctx) {}
  Result<> start() {
    std::string encoding(ctx_.request[http::field::content_encoding]);
    for (auto& c : encoding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (encoding == "gzip" || encoding == "x-gzip") {
      gunzip_ = std::make_unique<Gunzip>();
    } else if (!encoding.empty() && encoding != "identity") {
      return fail(
          Errc::kInvalidArgument,
          fmt::format("Content-Encoding '{}' is not understood; send gzip or none", encoding));
    }
    return ok();
  }
  // The next bytes; empty at the end of the body.
  awaitable<Result<std::string>> read() {
    while (true) {
      auto chunk = co_await ctx_.body->read();
      if (!chunk || !gunzip_) co_return chunk;
      if (chunk->empty()) {
        HUTCH_CO_TRY_VOID(gunzip_->finish());
        co_return std::string();
      }
      auto inflated = gunzip_->feed(*chunk);
      if (!inflated || !inflated->empty()) co_return inflated;
    }
  }

 private:
  RequestContext& ctx_;
  std::unique_ptr<Gunzip> gunzip_;
};

json writtenJson(const proto::FileInfo& info) {
  return json{{"name", info.name}, {"type", "file"}, {"path", info.path}};
}
}  // namespace

awaitable<Reply> filesPost(box::BoxService& service, RequestContext& ctx) {
  auto user = fileUser(ctx, service);
  if (!user) co_return envdError(user.error());
  auto agent = co_await service.agentFor(boxOf(ctx), ctx.principal.actor());
  if (!agent) co_return envdError(notRunning(agent.error(), boxOf(ctx)));
  std::optional<std::string> query_path;
  if (auto p = ctx.query.find("path"); p != ctx.query.end() && !p->second.empty()) {
    query_path = p->second;
  }
  const std::string content_type(ctx.request[http::field::content_type]);
  json written = json::array();
  Upload upload(*agent, *user);
  UploadBody body(ctx);
  if (auto started = body.start(); !started) co_return envdError(started.error());
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
      auto chunk = co_await body.read();
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
      auto chunk = co_await body.read();
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
        auto chunk = co_await body.read();
        if (!chunk || chunk->empty()) break;
      }
      co_return jsonReply(http::status::ok, written);
    }
  }
}

awaitable<Reply> health(box::BoxService& service, RequestContext& ctx) {
  auto agent = co_await service.agentFor(boxOf(ctx), ctx.principal.actor());
  if (!agent) co_return envdError(notRunning(agent.error(), boxOf(ctx)));
  co_return noContent();
}

}  // namespace hutch::e2b

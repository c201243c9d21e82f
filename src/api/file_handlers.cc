// Files without exec (docs/api.md): stat, list, mkdir, move, remove, raw reads and writes
// through the agent's file operations, and tar archives both ways. Every operation runs in the
// box as the request's user (the box's default user unless `user` says otherwise); the server's
// chain has already checked the caller and resolved {box} to a box it may see.
//
// Bytes stream both ways without being held: a read pulls the next chunk from the agent only
// after the previous one was written to the client; a write reads the next piece of the body
// only once the agent has granted window for it. Archives are tar run in the box as the user
// (as `hutch cp` does, as root), with every archive passed through TarFilter in hutchd: what a
// client uploads and what a box sends are both parsed, checked and written again.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>
#include <csignal>

#include "api/file_model.h"
#include "api/handlers.h"
#include "api/json_model.h"
#include "api/tar_filter.h"
#include "event/async_event.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;

constexpr size_t kStdinChunk = size_t{64} << 10;
// A PUT archive is checked this far (or to its end) before anything in the box changes, so a
// body that is not a tar, or a small archive with a bad entry, changes nothing.
constexpr size_t kArchiveLookahead = size_t{1} << 20;
constexpr size_t kMaxTarMessages = size_t{16} << 10;

const std::string& boxParam(const RequestContext& ctx) {
  return ctx.params.find("box")->second;
}

std::string userOr(box::BoxService& service, const RequestContext& ctx, const std::string& user) {
  return user.empty() ? service.execDefaults(boxParam(ctx)).user : user;
}

// The agent's error with what to do instead, where the agent cannot know it.
Error explain(const Error& error, std::string_view when_directory, std::string_view when_file) {
  if (error.code() != Errc::kInvalidArgument) return error;
  const std::string& m = error.message();
  if (!when_directory.empty() && m.ends_with(" is a directory")) {
    return Error(error.code(), m + "; " + std::string(when_directory));
  }
  if (!when_file.empty() &&
      (m.ends_with(" is not a directory") || m.ends_with(" is not a regular file"))) {
    return Error(error.code(), m + "; " + std::string(when_file));
  }
  return error;
}

constexpr std::string_view kDirHint =
    "list a directory with GET /v1/boxes/{box}/files/list or fetch it as a tar with "
    "/files/archive";
constexpr std::string_view kFileHint = "read a file with GET /v1/boxes/{box}/files";

awaitable<Reply> statFile(box::BoxService& service, RequestContext& ctx) {
  auto q = parseFileQuery(ctx.query, {});
  if (!q) co_return errorResponse(q.error());
  auto agent = co_await service.agentFor(boxParam(ctx), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  // Requests are named before they are passed: GCC 12 destroys a braced temporary handed to a
  // coroutine's by-value parameter twice.
  proto::FileStatRequest request{.path = q->path, .user = userOr(service, ctx, q->user)};
  auto info = co_await (*agent)->stat(std::move(request));
  if (!info) co_return errorResponse(info.error());
  co_return jsonResponse(http::status::ok, toJson(*info));
}

awaitable<Reply> listFiles(box::BoxService& service, RequestContext& ctx) {
  auto q = parseFileQuery(ctx.query, {"depth"});
  if (!q) co_return errorResponse(q.error());
  auto agent = co_await service.agentFor(boxParam(ctx), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  proto::FileListRequest request{
      .path = q->path, .user = userOr(service, ctx, q->user), .depth = q->depth};
  auto list = co_await (*agent)->listDir(std::move(request));
  if (!list) co_return errorResponse(explain(list.error(), "", kFileHint));
  json entries = json::array();
  for (const proto::FileInfo& entry : list->entries) entries.push_back(toJson(entry));
  co_return jsonResponse(http::status::ok,
                         json{{"entries", std::move(entries)}, {"truncated", list->truncated}});
}

awaitable<Reply> makeDirectory(box::BoxService& service, RequestContext& ctx) {
  auto request = parseMkdir(ctx.request.body());
  if (!request) co_return errorResponse(request.error());
  request->user = userOr(service, ctx, request->user);
  auto agent = co_await service.agentFor(boxParam(ctx), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  auto made = co_await (*agent)->makeDir(std::move(*request));
  if (!made) co_return errorResponse(made.error());
  co_return jsonResponse(made->created ? http::status::created : http::status::ok, toJson(*made));
}

awaitable<Reply> moveFile(box::BoxService& service, RequestContext& ctx) {
  auto request = parseMove(ctx.request.body());
  if (!request) co_return errorResponse(request.error());
  request->user = userOr(service, ctx, request->user);
  auto agent = co_await service.agentFor(boxParam(ctx), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  auto moved = co_await (*agent)->move(std::move(*request));
  if (!moved) {
    if (moved.error().code() == Errc::kAlreadyExists) {
      co_return errorResponse(
          Error(Errc::kAlreadyExists,
                moved.error().message() + "; set \"overwrite\": true to replace it"));
    }
    co_return errorResponse(moved.error());
  }
  co_return jsonResponse(http::status::ok, toJson(*moved));
}

awaitable<Reply> removeFile(box::BoxService& service, RequestContext& ctx) {
  auto q = parseFileQuery(ctx.query, {"recursive"});
  if (!q) co_return errorResponse(q.error());
  auto agent = co_await service.agentFor(boxParam(ctx), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  proto::FileRemoveRequest request{
      .path = q->path, .user = userOr(service, ctx, q->user), .recursive = q->recursive};
  auto removed = co_await (*agent)->remove(std::move(request));
  if (!removed) {
    if (removed.error().code() == Errc::kFailedPrecondition && !q->recursive &&
        removed.error().message().ends_with("is not empty")) {
      co_return errorResponse(Error(
          Errc::kFailedPrecondition,
          removed.error().message() + "; add ?recursive=true to remove it with its contents"));
    }
    co_return errorResponse(removed.error());
  }
  co_return jsonResponse(http::status::ok, json{{"removed", q->path}});
}

awaitable<bool> writeAll(Connection& c, std::string_view data) {
  boost::system::error_code ec;
  co_await asio::async_write(c.stream, asio::buffer(data.data(), data.size()),
                             asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

}  // namespace

// The header once the file is open (errors are ordinary answers until then), then exactly the
// size it had when opened: a file that grew is cut there; one that shrank, or a read that fails
// midway, ends the connection before Content-Length bytes were sent.
awaitable<std::optional<Response>> sendFile(std::shared_ptr<guest::FileReader> reader,
                                            RequestContext& ctx, std::string_view box) {
  const proto::FileInfo& info = reader->info();
  http::response<http::empty_body> res{http::status::ok, 11};
  res.set(http::field::content_type, "application/octet-stream");
  res.set("X-Hutch-File-Mode", std::to_string(info.mode));
  res.set("X-Hutch-File-Mtime-Ns", std::to_string(info.mtime_ns));
  res.content_length(info.size);
  res.keep_alive(ctx.request.keep_alive());
  http::response_serializer<http::empty_body> serializer(res);
  boost::system::error_code ec;
  co_await http::async_write_header(ctx.connection->stream, serializer,
                                    asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    reader->close();
    co_return std::nullopt;
  }
  if (ctx.request.method() == http::verb::head) {
    reader->close();
    ctx.keep_alive = true;
    co_return std::nullopt;
  }
  uint64_t left = info.size;
  while (left > 0) {
    auto chunk = co_await reader->next();
    if (!chunk || !*chunk) {
      if (!chunk) {
        spdlog::warn("api: reading {} in box {} failed after {} bytes: {}", info.path, box,
                     info.size - left, chunk.error().message());
      }
      co_return std::nullopt;  // fewer bytes than announced: the connection ends
    }
    std::string& data = **chunk;
    if (data.size() > left) data.resize(static_cast<size_t>(left));
    if (!co_await writeAll(*ctx.connection, data)) {
      reader->close();
      co_return std::nullopt;
    }
    left -= data.size();
  }
  if (!reader->ended()) reader->close();  // a file that grew since it was opened
  ctx.keep_alive = true;
  co_return std::nullopt;
}

namespace {

// GET /files: streamed by sendFile once open.
awaitable<Reply> readFile(box::BoxService& service, RequestContext& ctx) {
  auto q = parseFileQuery(ctx.query, {});
  if (!q) co_return errorResponse(q.error());
  auto agent = co_await service.agentFor(boxParam(ctx), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  proto::FileReadRequest request{.path = q->path, .user = userOr(service, ctx, q->user)};
  auto opened = co_await (*agent)->openRead(std::move(request));
  if (!opened) co_return errorResponse(explain(opened.error(), kDirHint, ""));
  co_return co_await sendFile(*opened, ctx, boxParam(ctx));
}

// PUT /files: the agent opens its temporary file first (a 403 or 400 comes before the client
// sends the body, with 100-continue), then the body goes through as it arrives.
awaitable<Reply> writeFile(box::BoxService& service, RequestContext& ctx) {
  auto q = parseFileQuery(ctx.query, {"mode", "owner", "group"});
  if (!q) co_return errorResponse(q.error());
  auto agent = co_await service.agentFor(boxParam(ctx), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  proto::FileWriteRequest request{.path = q->path,
                                  .user = userOr(service, ctx, q->user),
                                  .mode = q->mode,
                                  .owner = q->owner,
                                  .group = q->group,
                                  .parents = true};
  auto opened = co_await (*agent)->openWrite(std::move(request));
  if (!opened) {
    co_return errorResponse(explain(
        opened.error(), "a directory cannot be replaced by a file; choose another path", ""));
  }
  std::shared_ptr<guest::FileWriter> writer = *opened;
  while (true) {
    auto chunk = co_await ctx.body->read();
    if (!chunk) {
      writer->abort();
      co_return errorResponse(chunk.error().withContext("The file was left as it was"));
    }
    if (chunk->empty()) break;
    auto written = co_await writer->write(*chunk);
    if (!written) co_return errorResponse(written.error());
  }
  auto info = co_await writer->finish();
  if (!info) co_return errorResponse(info.error());
  co_return jsonResponse(http::status::ok, toJson(*info));
}

// ---- archives ----

// A tar run in the box: its messages (stdout and stderr, capped) and how it ended, collected
// beside the handler so that its output never waits for the handler.
struct TarRun {
  explicit TarRun(const asio::any_io_executor& ex) : changed(ex) {}
  event::AsyncEvent changed;
  std::string messages;
  std::optional<Result<proto::ExitStatus>> exit;
};

awaitable<void> collectTar(std::shared_ptr<guest::ExecSession> session,
                           std::shared_ptr<TarRun> run) {
  while (true) {
    auto event = co_await session->next();
    if (!event) {
      run->exit = fail(event.error());
      break;
    }
    if (event->kind == guest::ExecEvent::Kind::kExit) {
      run->exit = event->exit_status;
      break;
    }
    size_t room = kMaxTarMessages - std::min(kMaxTarMessages, run->messages.size());
    run->messages.append(event->data.substr(0, room));
  }
  run->changed.notify();
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.size() > 2000) text = text.substr(0, 2000) + "...";
  return text;
}

// tar's failure as an error: its messages (text from the box: shown, never interpreted beyond
// picking the code).
Error tarFailure(const Result<proto::ExitStatus>& exit, const std::string& messages,
                 std::string_view what) {
  if (!exit) return exit.error().withContext(fmt::format("{}: tar in the box", what));
  std::string how = exit->code ? fmt::format("exit {}", *exit->code)
                               : fmt::format("signal {}", exit->signal.value_or(0));
  std::string text = trimmed(messages);
  Errc code = Errc::kInternal;
  if (text.find("Permission denied") != std::string::npos ||
      text.find("Operation not permitted") != std::string::npos) {
    code = Errc::kPermissionDenied;
  } else if (text.find("No space left") != std::string::npos ||
             text.find("Disk quota exceeded") != std::string::npos) {
    code = Errc::kResourceExhausted;
  } else if (text.find("Cannot exec") != std::string::npos || (exit->code && *exit->code == 127)) {
    return Error(Errc::kUnsupported, fmt::format("{}: the box has no tar (exit 127); install tar "
                                                 "in its image",
                                                 what));
  }
  return Error(code, fmt::format("{}: tar in the box failed ({}){}{}", what, how,
                                 text.empty() ? "" : ": ", text));
}

bool succeeded(const Result<proto::ExitStatus>& exit) {
  return exit && exit->code && *exit->code == 0;
}

// Kills the box's tar unless it ended, whatever way the handler leaves.
struct KillUnlessEnded {
  std::shared_ptr<guest::ExecSession> session;
  std::shared_ptr<TarRun> run;
  ~KillUnlessEnded() {
    if (session && !run->exit) (void)session->signal(SIGKILL);
  }
};

// The directory and name tar is run with for an archive of `path` (absolute, clean).
std::pair<std::string, std::string> splitForTar(const std::string& path) {
  if (path == "/") return {"/", "."};
  size_t slash = path.rfind('/');
  std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  return {parent, path.substr(slash + 1)};
}

// GET /files/archive: tar -c in the box, its output checked (one top entry named after P) and
// streamed as it comes. Errors found before the first byte are ordinary answers; a failure
// later (a directory below P the user may not read, a box that broke the archive) ends the
// response without its last chunk, so the client sees an incomplete transfer, never a short
// archive that looks whole.
awaitable<Reply> readArchive(box::BoxService& service, RequestContext& ctx) {
  auto q = parseFileQuery(ctx.query, {});
  if (!q) co_return errorResponse(q.error());
  const std::string user = userOr(service, ctx, q->user);
  auto agent = co_await service.agentFor(boxParam(ctx), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());
  proto::FileStatRequest stat_request{.path = q->path, .user = user};
  auto info = co_await (*agent)->stat(std::move(stat_request));
  if (!info) co_return errorResponse(info.error());
  // What the user cannot read at the top is a 403 now rather than a broken stream later.
  if (info->type == proto::FileType::kDir) {
    proto::FileListRequest list_request{
        .path = info->path, .user = user, .depth = 1, .max_entries = 1};
    auto listed = co_await (*agent)->listDir(std::move(list_request));
    if (!listed) co_return errorResponse(listed.error());
  } else if (info->type == proto::FileType::kFile) {
    proto::FileReadRequest read_request{.path = info->path, .user = user};
    auto opened = co_await (*agent)->openRead(std::move(read_request));
    if (!opened) co_return errorResponse(opened.error());
    (*opened)->close();
  }
  if (ctx.request.method() == http::verb::head) {
    Response res{http::status::ok, 11};
    res.set(http::field::content_type, "application/x-tar");
    co_return res;
  }
  auto [parent, name] = splitForTar(info->path);
  proto::ExecRequest exec;
  exec.user = user;
  exec.argv = {"tar",
               "--create",
               "--file=-",
               "--format=posix",
               "--numeric-owner",
               "--pax-option=delete=atime,delete=ctime",
               "--blocking-factor=512",
               "--directory=" + parent,
               "--",
               name};
  auto started = co_await (*agent)->exec(std::move(exec));
  if (!started) co_return errorResponse(started.error().withContext("Cannot run tar in the box"));
  std::shared_ptr<guest::ExecSession> session = *started;
  TarFilter filter({.download = true,
                    .root = name == "." ? std::string() : name,
                    .error_code = Errc::kProtocol,
                    .where = "from the box"});
  std::string messages;
  std::optional<ChunkedWriter> out;
  std::string piece;
  std::optional<Error> failure;
  while (true) {
    auto event = co_await session->next();
    if (!event || event->kind == guest::ExecEvent::Kind::kExit) {
      Result<proto::ExitStatus> exit =
          event ? Result<proto::ExitStatus>(event->exit_status) : fail(event.error());
      if (!succeeded(exit)) {
        failure = tarFailure(exit, messages, "Cannot archive " + info->path);
      } else if (auto finished = filter.finish(piece); !finished) {
        failure = finished.error();
      }
      break;
    }
    if (event->kind == guest::ExecEvent::Kind::kStderr) {
      size_t room = kMaxTarMessages - std::min(kMaxTarMessages, messages.size());
      messages.append(event->data.substr(0, room));
      continue;
    }
    if (auto fed = filter.feed(event->data, piece); !fed) {
      failure = fed.error();
      break;
    }
    if (piece.empty()) continue;
    if (!out) {
      out.emplace(*ctx.connection);
      if (!co_await out->start(http::status::ok, "application/x-tar")) co_return std::nullopt;
    }
    if (!co_await out->write(piece)) co_return std::nullopt;  // the session's end kills tar
    piece.clear();
  }
  if (failure) {
    spdlog::warn("api: archive of {} in box {}: {}", info->path, boxParam(ctx), failure->message());
    if (!out) co_return errorResponse(*failure);
    co_return std::nullopt;  // no last chunk: the client sees the transfer break off
  }
  if (!out) {
    out.emplace(*ctx.connection);
    if (!co_await out->start(http::status::ok, "application/x-tar")) co_return std::nullopt;
  }
  if (!co_await out->write(piece) || !co_await out->finish()) co_return std::nullopt;
  ctx.keep_alive = true;
  co_return std::nullopt;
}

awaitable<Result<>> sendToTar(guest::ExecSession& session, std::string_view data) {
  while (!data.empty()) {
    std::string_view chunk = data.substr(0, kStdinChunk);
    HUTCH_CO_TRY_VOID(co_await session.writeStdin(chunk));
    data.remove_prefix(chunk.size());
  }
  co_return ok();
}

// PUT /files/archive: the body through TarFilter into tar -x in the box, as the user (files
// belong to the user, modes as archived, existing directories keep theirs).
awaitable<Reply> writeArchive(box::BoxService& service, RequestContext& ctx) {
  auto q = parseFileQuery(ctx.query, {});
  if (!q) co_return errorResponse(q.error());
  const std::string user = userOr(service, ctx, q->user);
  auto agent = co_await service.agentFor(boxParam(ctx), ctx.principal.actor());
  if (!agent) co_return errorResponse(agent.error());

  TarFilter filter({.download = false,
                    .root = {},
                    .error_code = Errc::kInvalidArgument,
                    .where = "in the uploaded archive"});
  std::string pending;
  bool body_done = false;
  auto readBody = [&]() -> awaitable<Result<>> {
    auto chunk = co_await ctx.body->read();
    if (!chunk) co_return fail(chunk.error());
    if (chunk->empty()) {
      body_done = true;
      co_return filter.finish(pending);
    }
    co_return filter.feed(*chunk, pending);
  };
  while (!body_done && pending.size() < kArchiveLookahead) {
    if (auto read = co_await readBody(); !read) co_return errorResponse(read.error());
  }

  proto::FileMkdirRequest mkdir_request{.path = q->path, .user = user};
  auto made = co_await (*agent)->makeDir(std::move(mkdir_request));
  if (!made) {
    if (made.error().code() == Errc::kAlreadyExists) {
      co_return errorResponse(
          Error(Errc::kInvalidArgument, fmt::format("{}: an archive is unpacked into a directory; "
                                                    "choose a directory's path",
                                                    made.error().message())));
    }
    co_return errorResponse(made.error());
  }
  const std::string dir = made->entry.path;
  proto::ExecRequest exec;
  exec.user = user;
  exec.pipe_stdin = true;
  exec.argv = {"tar",
               "--extract",
               "--file=-",
               "--directory=" + dir,
               "--no-same-owner",
               "--preserve-permissions",
               "--no-overwrite-dir",
               "--warning=no-unknown-keyword",
               "--warning=no-timestamp"};
  auto started = co_await (*agent)->exec(std::move(exec));
  if (!started) co_return errorResponse(started.error().withContext("Cannot run tar in the box"));
  auto run = std::make_shared<TarRun>(ctx.connection->stream.get_executor());
  KillUnlessEnded guard{*started, run};
  asio::co_spawn(ctx.connection->stream.get_executor(), collectTar(*started, run), asio::detached);
  guest::ExecSession& session = **started;

  std::optional<Error> refused;  // the body's fault: tar is stopped
  bool tar_gone = false;
  while (true) {
    if (!pending.empty()) {
      if (!co_await sendToTar(session, pending)) {
        tar_gone = true;  // tar ended early: its exit says why
        break;
      }
      pending.clear();
    }
    if (body_done) break;
    if (auto read = co_await readBody(); !read) {
      refused = read.error();
      break;
    }
  }
  if (refused) {
    (void)session.signal(SIGKILL);
  } else if (!tar_gone) {
    (void)session.closeStdin();
  }
  while (!run->exit) co_await run->changed.wait();
  if (refused) {
    co_return errorResponse(
        Error(refused->code(), fmt::format("{} (the {} entries before it were unpacked into {})",
                                           refused->message(), filter.entries(), dir)));
  }
  if (!succeeded(*run->exit)) {
    co_return errorResponse(tarFailure(*run->exit, run->messages, "Cannot unpack into " + dir));
  }
  co_return jsonResponse(http::status::ok, json{{"path", dir}, {"entries", filter.entries()}});
}

template <class F>
Route fileRoute(F f, box::BoxService& service, RouteOptions options = {}) {
  return Route([f, &service](RequestContext& ctx) { return f(service, ctx); }, options);
}

}  // namespace

void registerFileRoutes(ApiRouter& router, box::BoxService& service) {
  using http::verb;
  const RouteOptions streamed{.stream_body = true};
  router.add(verb::get, "/v1/boxes/{box}/files", fileRoute(readFile, service));
  router.add(verb::put, "/v1/boxes/{box}/files", fileRoute(writeFile, service, streamed));
  router.add(verb::delete_, "/v1/boxes/{box}/files", fileRoute(removeFile, service));
  router.add(verb::get, "/v1/boxes/{box}/files/stat", fileRoute(statFile, service));
  router.add(verb::get, "/v1/boxes/{box}/files/list", fileRoute(listFiles, service));
  router.add(verb::post, "/v1/boxes/{box}/files/mkdir", fileRoute(makeDirectory, service));
  router.add(verb::post, "/v1/boxes/{box}/files/move", fileRoute(moveFile, service));
  router.add(verb::get, "/v1/boxes/{box}/files/archive", fileRoute(readArchive, service));
  router.add(verb::put, "/v1/boxes/{box}/files/archive",
             fileRoute(writeArchive, service, streamed));
}

}  // namespace hutch::api

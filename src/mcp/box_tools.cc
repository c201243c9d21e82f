#include "mcp/box_tools.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/encoding.h"
#include "api/exec_model.h"
#include "api/file_model.h"
#include "api/handlers.h"
#include "api/json_model.h"
#include "base/check.h"
#include "mcp/tool_args.h"
#include "mcp/tool_catalog.h"

namespace hutch::mcp {

namespace {

using boost::asio::awaitable;
using nlohmann::json;

ToolResult done(json structured, std::string note = {}) {
  return ToolResult{std::move(structured), false, std::move(note)};
}

json boxList(const std::vector<box::Box>& boxes) {
  json items = json::array();
  for (const auto& b : boxes) items.push_back(api::toJson(b));
  return json{{"boxes", std::move(items)}};
}

// What hutch's messages say for the CLI, said for the tools.
std::string forTools(std::string message) {
  const std::pair<std::string_view, std::string_view> replacements[] = {
      {"(see 'hutch ls' for the boxes that exist)", "(list_boxes shows your boxes)"},
      {"exec needs a running box", "it must be running (start_box boots a stopped box)"},
  };
  for (const auto& [from, to] : replacements) {
    if (auto at = message.find(from); at != std::string::npos) {
      message.replace(at, from.size(), to);
    }
  }
  return message;
}

std::string userOr(box::BoxService& service, const std::string& box, const std::string& user) {
  return user.empty() ? service.execDefaults(box).user : user;
}

}  // namespace

ToolResult toolError(const Error& error) {
  Error shown(error.code(), forTools(error.describe()));
  return ToolResult{api::errorJson(shown), true, {}};
}

BoxTools::BoxTools(box::BoxService& service, box::PortForwards& ports, api::ParamScoper scoper)
    : service_(service), ports_(ports), scoper_(std::move(scoper)) {
  calls_ = {{"list_boxes", &BoxTools::listBoxes},
            {"create_box", &BoxTools::createBox},
            {"run_command", &BoxTools::runCommand},
            {"read_file", &BoxTools::readFile},
            {"write_file", &BoxTools::writeFile},
            {"list_files", &BoxTools::listFiles},
            {"fork_box", &BoxTools::forkBox},
            {"checkpoint_box", &BoxTools::checkpointBox},
            {"list_checkpoints", &BoxTools::listCheckpoints},
            {"rollback_box", &BoxTools::rollbackBox},
            {"publish_port", &BoxTools::publishPort},
            {"stop_box", &BoxTools::stopBox},
            {"start_box", &BoxTools::startBox},
            {"remove_box", &BoxTools::removeBox}};
  for (const json& t : toolCatalog()) {
    HUTCH_CHECK(calls_.contains(t["name"].get<std::string>()));
  }
  HUTCH_CHECK(calls_.size() == toolCatalog().size());
}

const json& BoxTools::definitions() const {
  return toolCatalog();
}

bool BoxTools::has(std::string_view name) const {
  return calls_.find(name) != calls_.end();
}

awaitable<ToolResult> BoxTools::call(std::string name, json arguments, api::Principal caller) {
  auto it = calls_.find(name);
  HUTCH_CHECK(it != calls_.end());  // Server::toolsCall asks has() first
  Result<ToolResult> result = co_await (this->*(it->second))(arguments, caller);
  if (!result) {
    spdlog::info("mcp: {} by {} failed: {}", name, caller.describe(), result.error().describe());
    co_return toolError(result.error());
  }
  co_return std::move(*result);
}

Result<std::string> BoxTools::resolve(const api::Principal& caller, const std::string& key) const {
  api::PathParams params{{"box", key}};
  HUTCH_TRY_VOID(scoper_(caller, params));
  return params["box"];
}

awaitable<Result<ToolResult>> BoxTools::listBoxes(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY_VOID(noArgs(args, "list_boxes"));
  HUTCH_CO_TRY(auto boxes, service_.list(api::ownerFilter(caller)));
  co_return done(boxList(boxes));
}

awaitable<Result<ToolResult>> BoxTools::createBox(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY(box::BoxSpec spec, createBoxArgs(args));
  spec.owner = caller.owner();
  HUTCH_CO_TRY(box::Box created, co_await service_.create(std::move(spec)));
  co_return done(api::toJson(created));
}

awaitable<Result<ToolResult>> BoxTools::runCommand(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY(RunArgs a, runCommandArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  const uint64_t timeout_s = a.run.timeout_ms / 1000;
  const observe::Actor actor = caller.actor();
  HUTCH_CO_TRY(api::ExecOutcome outcome,
               co_await api::runToCompletion(service_, id, actor, std::move(a.run)));
  std::string note;
  if (outcome.timed_out) {
    note += fmt::format(
        "The command was killed after {} s (timeout_seconds); run long jobs in the background "
        "(nohup ... &) and poll, or raise timeout_seconds. ",
        timeout_s);
  }
  if (outcome.truncated) {
    note += fmt::format(
        "Output was cut at {} KiB per stream; redirect it to a file and read parts of it "
        "(head, tail, grep). ",
        kMaxCommandOutput >> 10);
  }
  while (!note.empty() && note.back() == ' ') note.pop_back();
  ToolResult result = done(api::toJson(outcome), std::move(note));
  // It could not start (no such program, cwd or user): not a command's own failure.
  result.is_error = outcome.error.has_value();
  co_return result;
}

awaitable<Result<ToolResult>> BoxTools::readFile(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY(ReadArgs a, readFileArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  const observe::Actor actor = caller.actor();
  HUTCH_CO_TRY(auto agent, co_await service_.agentFor(id, actor));
  proto::FileReadRequest request{.path = a.path, .user = userOr(service_, id, a.user)};
  HUTCH_CO_TRY(auto reader, co_await agent->openRead(std::move(request)));
  std::string content;
  bool truncated = false;
  while (true) {
    HUTCH_CO_TRY(auto chunk, co_await reader->next());
    if (!chunk) break;
    if (content.size() + chunk->size() > kMaxReadBytes) {
      content.append(*chunk, 0, kMaxReadBytes - content.size());
      truncated = true;
      break;
    }
    content += *chunk;
  }
  if (!reader->ended()) reader->close();
  const proto::FileInfo& info = reader->info();
  const bool text = api::isValidUtf8(content);
  json out{{"path", info.path},
           {"size", info.size},
           {"encoding", text ? "utf-8" : "base64"},
           {"content", text ? content : api::base64Encode(content)},
           {"truncated", truncated}};
  std::string note;
  if (truncated) {
    note = fmt::format(
        "Only the first {} KiB of {} bytes are here; read further with run_command (e.g. tail "
        "-c +{} FILE | head -c {}).",
        kMaxReadBytes >> 10, info.size, kMaxReadBytes + 1, kMaxReadBytes);
  }
  co_return done(std::move(out), std::move(note));
}

awaitable<Result<ToolResult>> BoxTools::writeFile(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY(WriteArgs a, writeFileArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  const observe::Actor actor = caller.actor();
  HUTCH_CO_TRY(auto agent, co_await service_.agentFor(id, actor));
  proto::FileWriteRequest request{
      .path = a.path, .user = userOr(service_, id, a.user), .mode = a.mode, .parents = true};
  HUTCH_CO_TRY(auto writer, co_await agent->openWrite(std::move(request)));
  if (auto written = co_await writer->write(a.content); !written) {
    writer->abort();
    co_return fail(written.error().withContext("The file was left as it was"));
  }
  HUTCH_CO_TRY(proto::FileInfo info, co_await writer->finish());
  co_return done(api::toJson(info));
}

awaitable<Result<ToolResult>> BoxTools::listFiles(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY(ListArgs a, listFilesArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  const observe::Actor actor = caller.actor();
  HUTCH_CO_TRY(auto agent, co_await service_.agentFor(id, actor));
  proto::FileListRequest request{.path = a.path,
                                 .user = userOr(service_, id, a.user),
                                 .depth = a.depth,
                                 .max_entries = kMaxListEntries};
  HUTCH_CO_TRY(proto::FileList list, co_await agent->listDir(std::move(request)));
  json entries = json::array();
  for (const proto::FileInfo& entry : list.entries) entries.push_back(api::toJson(entry));
  std::string note;
  if (list.truncated) {
    note = fmt::format(
        "Only the first {} entries are here; list a subdirectory or a smaller "
        "depth.",
        kMaxListEntries);
  }
  co_return done(json{{"entries", std::move(entries)}, {"truncated", list.truncated}},
                 std::move(note));
}

awaitable<Result<ToolResult>> BoxTools::forkBox(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY(ForkArgs a, forkBoxArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  HUTCH_CO_TRY(auto children, co_await service_.fork(id, std::move(a.spec)));
  co_return done(boxList(children));
}

awaitable<Result<ToolResult>> BoxTools::checkpointBox(const json& args,
                                                      const api::Principal& caller) {
  HUTCH_CO_TRY(CheckpointArgs a, checkpointBoxArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  HUTCH_CO_TRY(box::Snapshot snapshot, co_await service_.checkpoint(id, std::move(a.name)));
  co_return done(api::toJson(snapshot));
}

awaitable<Result<ToolResult>> BoxTools::listCheckpoints(const json& args,
                                                        const api::Principal& caller) {
  HUTCH_CO_TRY(BoxArg a, boxOnlyArgs(args, "list_checkpoints"));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  HUTCH_CO_TRY(auto checkpoints, service_.checkpoints(id));
  json items = json::array();
  for (const auto& s : checkpoints) items.push_back(api::toJson(s));
  co_return done(json{{"checkpoints", std::move(items)}});
}

awaitable<Result<ToolResult>> BoxTools::rollbackBox(const json& args,
                                                    const api::Principal& caller) {
  HUTCH_CO_TRY(RollbackArgs a, rollbackBoxArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  HUTCH_CO_TRY(box::Box rolled, co_await service_.rollback(id, a.checkpoint));
  co_return done(api::toJson(rolled));
}

awaitable<Result<ToolResult>> BoxTools::publishPort(const json& args,
                                                    const api::Principal& caller) {
  HUTCH_CO_TRY(PublishArgs a, publishPortArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  HUTCH_CO_TRY(box::PortStatus status, ports_.add(id, std::move(a.forward)));
  co_return done(api::toJson(status));
}

awaitable<Result<ToolResult>> BoxTools::stopBox(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY(StopArgs a, stopBoxArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  // No co_await inside a conditional expression: GCC 12 mangles the temporaries.
  Result<box::Box> stopped = fail(Errc::kInternal, "not stopped");
  if (a.shutdown) {
    stopped = co_await service_.stop(id);
  } else {
    stopped = co_await service_.suspend(id);
  }
  HUTCH_CO_TRY(box::Box box, std::move(stopped));
  co_return done(api::toJson(box));
}

awaitable<Result<ToolResult>> BoxTools::startBox(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY(BoxArg a, boxOnlyArgs(args, "start_box"));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  HUTCH_CO_TRY(box::Box started, co_await service_.start(id));
  co_return done(api::toJson(started));
}

awaitable<Result<ToolResult>> BoxTools::removeBox(const json& args, const api::Principal& caller) {
  HUTCH_CO_TRY(RemoveArgs a, removeBoxArgs(args));
  HUTCH_CO_TRY(std::string id, resolve(caller, a.box));
  if (auto removed = co_await service_.remove(id, a.force); !removed) {
    if (removed.error().code() == Errc::kFailedPrecondition && !a.force) {
      // hutch's message ends with the CLI's way ("hutch rm -f"): the tools' way instead.
      std::string message = removed.error().message();
      message = message.substr(0, message.find("; stop it first"));
      co_return fail(Errc::kFailedPrecondition,
                     message +
                         "; call remove_box with force: true to remove it as it is, or "
                         "stop_box first");
    }
    co_return fail(removed.error());
  }
  co_return done(json{{"removed", id}});
}

}  // namespace hutch::mcp

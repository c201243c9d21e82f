#include "mcp/tool_args.h"

#include <fmt/format.h>

#include "api/encoding.h"
#include "api/file_model.h"
#include "api/json_model.h"

namespace hutch::mcp {

namespace {

using api::readField;
using api::rejectUnknownFields;

// The arguments without "box" (required: a non-empty string), after checking the known ones.
Result<std::pair<std::string, json>> splitBox(const json& args, std::set<std::string> known,
                                              std::string_view tool) {
  known.insert("box");
  const std::string what = fmt::format("the arguments of {}", tool);
  HUTCH_TRY_VOID(rejectUnknownFields(args, known, what));
  auto it = args.find("box");
  if (it == args.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} needs \"box\": the id or name of one of your boxes (list_boxes "
                            "shows them)",
                            tool));
  }
  json rest = args;
  rest.erase("box");
  return std::pair{it->get<std::string>(), std::move(rest)};
}

Result<std::string> requiredString(const json& args, const char* key, std::string_view tool,
                                   std::string_view hint) {
  std::string value;
  HUTCH_TRY_VOID(readField(args, key, value, fmt::format("the arguments of {}", tool)));
  if (value.empty()) {
    return fail(Errc::kInvalidArgument, fmt::format("{} needs \"{}\": {}", tool, key, hint));
  }
  return value;
}

}  // namespace

Result<> noArgs(const json& args, std::string_view tool) {
  return rejectUnknownFields(args, {}, fmt::format("the arguments of {} (it takes none)", tool));
}

Result<box::BoxSpec> createBoxArgs(const json& args) {
  // The body of POST /v1/boxes; the owner is set from the caller, never from here. An agent gets
  // a box, never the host's folders, whoever runs the MCP server.
  if (args.is_object() && args.contains("shares")) {
    return fail(Errc::kInvalidArgument,
                "create_box takes no \"shares\": host folders are shared by the host's "
                "administrator with hutch run -v, never by an agent");
  }
  return api::parseCreateBox(args.dump());
}

Result<BoxArg> boxOnlyArgs(const json& args, std::string_view tool) {
  HUTCH_TRY(auto split, splitBox(args, {}, tool));
  return BoxArg{std::move(split.first)};
}

Result<StopArgs> stopBoxArgs(const json& args) {
  HUTCH_TRY(auto split, splitBox(args, {"shutdown"}, "stop_box"));
  StopArgs out{std::move(split.first)};
  HUTCH_TRY_VOID(readField(split.second, "shutdown", out.shutdown, "the arguments of stop_box"));
  return out;
}

Result<RemoveArgs> removeBoxArgs(const json& args) {
  HUTCH_TRY(auto split, splitBox(args, {"force"}, "remove_box"));
  RemoveArgs out{std::move(split.first)};
  HUTCH_TRY_VOID(readField(split.second, "force", out.force, "the arguments of remove_box"));
  return out;
}

Result<RunArgs> runCommandArgs(const json& args) {
  constexpr std::string_view kTool = "run_command";
  HUTCH_TRY(
      auto split,
      splitBox(args, {"command", "argv", "cwd", "env", "user", "stdin", "timeout_seconds"}, kTool));
  json& rest = split.second;
  // The API's exec request, with the command and the limits put in.
  json exec = json::object();
  for (const char* key : {"argv", "cwd", "env", "user", "stdin"}) {
    if (auto it = rest.find(key); it != rest.end()) exec[key] = *it;
  }
  bool has_command = rest.contains("command") && !rest["command"].is_null();
  bool has_argv = exec.contains("argv") && !exec["argv"].is_null();
  if (has_command == has_argv) {
    return fail(Errc::kInvalidArgument,
                "run_command needs either \"command\" (a shell command line, run with sh -c) or "
                "\"argv\" (the program and its arguments), not both and not neither");
  }
  if (has_command) {
    if (!rest["command"].is_string() || rest["command"].get_ref<const std::string&>().empty()) {
      return fail(Errc::kInvalidArgument,
                  "\"command\" must be a non-empty string, e.g. \"ls -la /tmp\"");
    }
    exec["argv"] = json::array({"sh", "-c", rest["command"]});
  }
  int64_t timeout = kDefaultCommandTimeoutSeconds;
  HUTCH_TRY_VOID(readField(rest, "timeout_seconds", timeout, "the arguments of run_command"));
  if (timeout < 1 || static_cast<uint64_t>(timeout) > kMaxCommandTimeoutSeconds) {
    return fail(Errc::kInvalidArgument, fmt::format("\"timeout_seconds\" must be 1 to {}, not {}",
                                                    kMaxCommandTimeoutSeconds, timeout));
  }
  exec["timeout_ms"] = timeout * 1000;
  exec["max_output_bytes"] = kMaxCommandOutput;
  HUTCH_TRY(api::ExecRun run, api::parseExecRun(exec.dump()));
  return RunArgs{std::move(split.first), std::move(run)};
}

Result<ReadArgs> readFileArgs(const json& args) {
  constexpr std::string_view kTool = "read_file";
  HUTCH_TRY(auto split, splitBox(args, {"path", "user"}, kTool));
  ReadArgs out{.box = std::move(split.first)};
  HUTCH_TRY(out.path, requiredString(split.second, "path", kTool,
                                     "the file's path in the box (absolute, or relative to the "
                                     "user's home)"));
  HUTCH_TRY_VOID(readField(split.second, "user", out.user, "the arguments of read_file"));
  return out;
}

Result<WriteArgs> writeFileArgs(const json& args) {
  constexpr std::string_view kTool = "write_file";
  constexpr std::string_view kWhat = "the arguments of write_file";
  HUTCH_TRY(auto split, splitBox(args, {"path", "content", "encoding", "mode", "user"}, kTool));
  const json& rest = split.second;
  WriteArgs out{.box = std::move(split.first)};
  HUTCH_TRY(out.path, requiredString(rest, "path", kTool,
                                     "where to write in the box (absolute, or relative to the "
                                     "user's home)"));
  auto content = rest.find("content");
  if (content == rest.end() || !content->is_string()) {
    return fail(Errc::kInvalidArgument,
                "write_file needs \"content\": the file's text (or base64 with \"encoding\": "
                "\"base64\"); an empty string makes an empty file");
  }
  std::string encoding = "utf-8";
  HUTCH_TRY_VOID(readField(rest, "encoding", encoding, kWhat));
  if (encoding == "base64") {
    HUTCH_TRY(out.content, api::base64Decode(content->get<std::string>(), "\"content\""));
  } else if (encoding == "utf-8") {
    out.content = content->get<std::string>();
  } else {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("\"encoding\" is \"utf-8\" (the default) or \"base64\", not \"{}\"", encoding));
  }
  if (auto mode = rest.find("mode"); mode != rest.end() && !mode->is_null()) {
    HUTCH_TRY(out.mode, api::parseMode(*mode, "\"mode\""));
  }
  HUTCH_TRY_VOID(readField(rest, "user", out.user, kWhat));
  return out;
}

Result<ListArgs> listFilesArgs(const json& args) {
  constexpr std::string_view kTool = "list_files";
  constexpr std::string_view kWhat = "the arguments of list_files";
  HUTCH_TRY(auto split, splitBox(args, {"path", "depth", "user"}, kTool));
  ListArgs out{.box = std::move(split.first)};
  HUTCH_TRY(out.path, requiredString(split.second, "path", kTool,
                                     "the directory to list (absolute, or relative to the "
                                     "user's home)"));
  int64_t depth = 1;
  HUTCH_TRY_VOID(readField(split.second, "depth", depth, kWhat));
  if (depth < 1 || depth > kMaxListDepth) {
    return fail(Errc::kInvalidArgument,
                fmt::format("\"depth\" must be 1 to {}, not {}", kMaxListDepth, depth));
  }
  out.depth = static_cast<uint32_t>(depth);
  HUTCH_TRY_VOID(readField(split.second, "user", out.user, kWhat));
  return out;
}

Result<ForkArgs> forkBoxArgs(const json& args) {
  HUTCH_TRY(auto split, splitBox(args, {"count", "names"}, "fork_box"));
  HUTCH_TRY(box::ForkSpec spec, api::parseFork(split.second.dump()));
  return ForkArgs{std::move(split.first), std::move(spec)};
}

Result<CheckpointArgs> checkpointBoxArgs(const json& args) {
  HUTCH_TRY(auto split, splitBox(args, {"name"}, "checkpoint_box"));
  HUTCH_TRY(std::string name, api::parseCheckpoint(split.second.dump()));
  return CheckpointArgs{std::move(split.first), std::move(name)};
}

Result<RollbackArgs> rollbackBoxArgs(const json& args) {
  HUTCH_TRY(auto split, splitBox(args, {"checkpoint"}, "rollback_box"));
  if (!split.second.contains("checkpoint")) {
    return fail(Errc::kInvalidArgument,
                "rollback_box needs \"checkpoint\": a checkpoint's name (list_checkpoints shows "
                "them)");
  }
  HUTCH_TRY(std::string checkpoint, api::parseRollback(split.second.dump()));
  return RollbackArgs{std::move(split.first), std::move(checkpoint)};
}

Result<PublishArgs> publishPortArgs(const json& args) {
  HUTCH_TRY(auto split, splitBox(args, {"box_port", "host_port", "address"}, "publish_port"));
  json request = split.second;
  // The host port defaults to the box's: publish_port {box, box_port: 8080} is 8080 -> 8080.
  if (request.contains("box_port") && !request.contains("host_port")) {
    request["host_port"] = request["box_port"];
  }
  HUTCH_TRY(box::PortForward forward, api::parsePortForward(request.dump()));
  return PublishArgs{std::move(split.first), std::move(forward)};
}

}  // namespace hutch::mcp

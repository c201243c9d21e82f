// The arguments of hutch's MCP tools (docs/mcp.md), read into the requests the API's own
// parsers make, so a tool takes exactly what the matching API call takes. Strict: unknown
// arguments and wrong types are kInvalidArgument naming them (the tool's isError message).
// Pure: unit-tested beside the tool catalog (tool_catalog.h), whose schemas say the same.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/exec_model.h"
#include "base/result.h"
#include "box/box.h"
#include "box/port_forward.h"

namespace hutch::mcp {

using nlohmann::json;

// run_command keeps this much of each of stdout and stderr (the rest is cut, with a note).
inline constexpr uint64_t kMaxCommandOutput = uint64_t{64} << 10;
inline constexpr uint64_t kDefaultCommandTimeoutSeconds = 60;
inline constexpr uint64_t kMaxCommandTimeoutSeconds = 3600;
// read_file returns at most this much of a file (with a note when there is more).
inline constexpr uint64_t kMaxReadBytes = uint64_t{256} << 10;
// list_files returns at most this many entries.
inline constexpr uint32_t kMaxListEntries = 1000;
inline constexpr uint32_t kMaxListDepth = 8;

// create_box: the body of POST /v1/boxes.
Result<box::BoxSpec> createBoxArgs(const json& args);

struct BoxArg {
  std::string box;  // id, unique id prefix or name, as the caller gave it
};
// Tools that take only "box" (start_box, list_checkpoints).
Result<BoxArg> boxOnlyArgs(const json& args, std::string_view tool);

struct StopArgs {
  std::string box;
  bool shutdown = false;  // power off instead of suspending
};
Result<StopArgs> stopBoxArgs(const json& args);

struct RemoveArgs {
  std::string box;
  bool force = false;
};
Result<RemoveArgs> removeBoxArgs(const json& args);

struct RunArgs {
  std::string box;
  api::ExecRun run;  // argv: "command" through sh -c, or "argv"
};
Result<RunArgs> runCommandArgs(const json& args);

struct ReadArgs {
  std::string box;
  std::string path;
  std::string user;  // empty: the box's default user
};
Result<ReadArgs> readFileArgs(const json& args);

struct WriteArgs {
  std::string box;
  std::string path;
  std::string content;  // the bytes (decoded from base64 when encoding is base64)
  std::optional<uint32_t> mode;
  std::string user;
};
Result<WriteArgs> writeFileArgs(const json& args);

struct ListArgs {
  std::string box;
  std::string path;
  uint32_t depth = 1;
  std::string user;
};
Result<ListArgs> listFilesArgs(const json& args);

struct ForkArgs {
  std::string box;
  box::ForkSpec spec;
};
Result<ForkArgs> forkBoxArgs(const json& args);

struct CheckpointArgs {
  std::string box;
  std::string name;  // empty: generated
};
Result<CheckpointArgs> checkpointBoxArgs(const json& args);

struct RollbackArgs {
  std::string box;
  std::string checkpoint;
};
Result<RollbackArgs> rollbackBoxArgs(const json& args);

struct PublishArgs {
  std::string box;
  box::PortForward forward;
};
Result<PublishArgs> publishPortArgs(const json& args);

// list_boxes takes no arguments (an empty object).
Result<> noArgs(const json& args, std::string_view tool);

}  // namespace hutch::mcp

#include "mcp/tool_catalog.h"

#include <fmt/format.h>

#include "mcp/tool_args.h"

namespace hutch::mcp {

namespace {

using nlohmann::json;

const json kBox = {{"type", "string"},
                   {"minLength", 1},
                   {"description", "The box: its id, a unique id prefix or its name"}};
const json kUser = {{"type", "string"},
                    {"description",
                     "Run as this user in the box (default: hutch, uid 1000, "
                     "with passwordless sudo; \"root\" for root)"}};

struct Hints {
  bool read_only = false;
  bool destructive = false;
  bool idempotent = false;
};

json tool(const char* name, const char* title, std::string description, json properties,
          json required, Hints hints) {
  json schema{
      {"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = std::move(required);
  return json{{"name", name},
              {"title", title},
              {"description", std::move(description)},
              {"inputSchema", std::move(schema)},
              {"annotations",
               {{"title", title},
                {"readOnlyHint", hints.read_only},
                {"destructiveHint", hints.destructive},
                {"idempotentHint", hints.idempotent},
                // Boxes are local VMs: a tool reaches no outside service by itself.
                {"openWorldHint", false}}}};
}

json makeCatalog() {
  json tools = json::array();
  tools.push_back(
      tool("list_boxes", "List boxes",
           "Lists your boxes (small Linux VMs, one per task) with their id, name, state (running, "
           "stopped, failed...), template and size.",
           json::object(), json::array(), {.read_only = true, .idempotent = true}));
  tools.push_back(tool(
      "create_box", "Create a box",
      "Boots a new box: a Debian Linux VM with its own kernel, disk and network, ready to run "
      "commands (run_command) within seconds. Its network reaches nothing unless "
      "network_policy allows it. Returns the box (use its id or name in the other tools).",
      {{"name",
        {{"type", "string"},
         {"description", "A unique name (letters, digits, '-', '_', '.'); default: generated"}}},
       {"template",
        {{"type", "string"},
         {"description",
          "The template (image) to boot; default \"base\" (Debian with common "
          "tools); \"docker\" adds Docker where the host has it"}}},
       {"cpus", {{"type", "integer"}, {"minimum", 1}, {"maximum", 64}, {"default", 1}}},
       {"memory_mib",
        {{"type", "integer"}, {"minimum", 128}, {"maximum", 65536}, {"default", 512}}},
       {"disk_mib",
        {{"type", "integer"},
         {"anyOf", json::array({json{{"const", 0}},
                                json{{"minimum", 512}, {"maximum", 16u * 1024 * 1024}}})},
         {"description",
          "Disk size in MiB, 512 MiB to 16 TiB (the guest grows its filesystem "
          "to it); 0 or absent: the template's size"}}},
       {"network_policy",
        {{"description",
          "Egress: a preset (\"none\": no network, the default; \"allow-all\"; "
          "\"debian-mirrors\": apt only) or a policy object such as {\"allow\": [{\"domain\": "
          "\"pypi.org\", \"ports\": [443]}], \"presets\": [\"debian-mirrors\"]}"},
         {"anyOf", json::array({json{{"type", "string"}}, json{{"type", "object"}}})}}},
       {"env",
        {{"type", "object"},
         {"additionalProperties", {{"type", "string"}}},
         {"description", "Environment variables of every command run in the box"}}},
       {"secrets",
        {{"type", "array"},
         {"items", {{"type", "string"}}},
         {"description",
          "Names of host secrets the box may use: it gets a placeholder, the "
          "egress proxy swaps in the value for the secret's domain"}}}},
      json::array(), {}));
  tools.push_back(
      tool("run_command", "Run a command",
           fmt::format(
               "Runs a command in a running box and waits for it: returns exit_code, stdout and "
               "stderr. Give \"command\" (a shell command line, run with sh -c) or \"argv\". The "
               "command is killed after timeout_seconds (default {}, timed_out is then true). Each "
               "of stdout and stderr is cut at {} KiB (truncated is then true): redirect large "
               "output to a file and read parts of it.",
               kDefaultCommandTimeoutSeconds, kMaxCommandOutput >> 10),
           {{"box", kBox},
            {"command",
             {{"type", "string"},
              {"minLength", 1},
              {"description", "A shell command line, e.g. \"cd /src && make test\""}}},
            {"argv",
             {{"type", "array"},
              {"items", {{"type", "string"}}},
              {"minItems", 1},
              {"description", "The program and its arguments, without a shell"}}},
            {"cwd", {{"type", "string"}, {"description", "Working directory (default: the home)"}}},
            {"env", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
            {"user", kUser},
            {"stdin", {{"type", "string"}, {"description", "Text given to the command's stdin"}}},
            {"timeout_seconds",
             {{"type", "integer"},
              {"minimum", 1},
              {"maximum", kMaxCommandTimeoutSeconds},
              {"default", kDefaultCommandTimeoutSeconds}}}},
           json::array({"box"}), {.destructive = true}));
  tools.push_back(tool(
      "read_file", "Read a file",
      fmt::format("Reads a file in a box. Text comes as it is; other bytes as base64 (encoding "
                  "says which). At most {} KiB are returned (truncated is then true; read the "
                  "rest with run_command, e.g. tail -c).",
                  kMaxReadBytes >> 10),
      {{"box", kBox},
       {"path",
        {{"type", "string"},
         {"minLength", 1},
         {"description", "Absolute, or relative to the user's home"}}},
       {"user", kUser}},
      json::array({"box", "path"}), {.read_only = true, .idempotent = true}));
  tools.push_back(tool(
      "write_file", "Write a file",
      "Writes a file in a box (replacing it whole; missing parent directories are made). The "
      "file belongs to the user.",
      {{"box", kBox},
       {"path", {{"type", "string"}, {"minLength", 1}}},
       {"content", {{"type", "string"}, {"description", "The content (text, or base64)"}}},
       {"encoding",
        {{"type", "string"}, {"enum", json::array({"utf-8", "base64"})}, {"default", "utf-8"}}},
       {"mode",
        {{"description", "Permissions: octal text such as \"0755\", or a number"},
         {"anyOf", json::array({json{{"type", "string"}}, json{{"type", "integer"}}})}}},
       {"user", kUser}},
      json::array({"box", "path", "content"}), {.destructive = true, .idempotent = true}));
  tools.push_back(tool(
      "list_files", "List files",
      fmt::format("Lists a directory in a box (to depth levels below it): path, type, size, "
                  "mode and modification time of each entry, at most {}.",
                  kMaxListEntries),
      {{"box", kBox},
       {"path", {{"type", "string"}, {"minLength", 1}}},
       {"depth", {{"type", "integer"}, {"minimum", 1}, {"maximum", kMaxListDepth}, {"default", 1}}},
       {"user", kUser}},
      json::array({"box", "path"}), {.read_only = true, .idempotent = true}));
  tools.push_back(
      tool("fork_box", "Fork a box",
           "Copies a running box, memory and disk, into new running boxes (processes and unsaved "
           "files included): try things in parallel from one state.",
           {{"box", kBox},
            {"count", {{"type", "integer"}, {"minimum", 1}, {"default", 1}}},
            {"names", {{"type", "array"}, {"items", {{"type", "string"}}}}}},
           json::array({"box"}), {}));
  tools.push_back(
      tool("checkpoint_box", "Checkpoint a box",
           "Saves a running box's memory and disk as a named checkpoint that rollback_box returns "
           "to.",
           {{"box", kBox},
            {"name", {{"type", "string"}, {"description", "Default: generated (cp-...)"}}}},
           json::array({"box"}), {}));
  tools.push_back(tool("list_checkpoints", "List checkpoints", "Lists a box's checkpoints.",
                       {{"box", kBox}}, json::array({"box"}),
                       {.read_only = true, .idempotent = true}));
  tools.push_back(
      tool("rollback_box", "Roll a box back",
           "Returns a box to a checkpoint exactly (files and running processes); what happened "
           "since is lost. The box runs afterwards.",
           {{"box", kBox}, {"checkpoint", {{"type", "string"}, {"minLength", 1}}}},
           json::array({"box", "checkpoint"}), {.destructive = true, .idempotent = true}));
  tools.push_back(
      tool("publish_port", "Publish a port",
           "Makes a TCP port of a running box reachable on the host (127.0.0.1 by default): "
           "host_port on the host forwards to box_port in the box.",
           {{"box", kBox},
            {"box_port", {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}}},
            {"host_port",
             {{"type", "integer"},
              {"minimum", 1},
              {"maximum", 65535},
              {"description", "Default: the same as box_port"}}},
            {"address",
             {{"type", "string"},
              {"description", "The host address to listen on (default 127.0.0.1)"}}}},
           json::array({"box", "box_port"}), {.idempotent = true}));
  tools.push_back(
      tool("stop_box", "Stop a box",
           "Suspends a box: its memory, running processes and disk are kept and it uses no CPU "
           "or memory until start_box resumes it as it was. With shutdown: true it powers off "
           "cleanly instead (processes end; the disk stays).",
           {{"box", kBox}, {"shutdown", {{"type", "boolean"}, {"default", false}}}},
           json::array({"box"}), {.destructive = true, .idempotent = true}));
  tools.push_back(tool("start_box", "Start a box",
                       "Resumes a suspended box with every process as it was, or boots a stopped "
                       "one again from its own disk: every file is where it was.",
                       {{"box", kBox}}, json::array({"box"}), {.idempotent = true}));
  tools.push_back(
      tool("remove_box", "Remove a box",
           "Removes a box and every file in it, for good. A running box needs force: true.",
           {{"box", kBox}, {"force", {{"type", "boolean"}, {"default", false}}}},
           json::array({"box"}), {.destructive = true}));
  return tools;
}

}  // namespace

const nlohmann::json& toolCatalog() {
  static const json catalog = makeCatalog();
  return catalog;
}

}  // namespace hutch::mcp

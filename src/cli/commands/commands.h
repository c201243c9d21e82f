// One function per CLI verb. Each returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "cli/commands/cp.h"
#include "cli/commands/exec_stream.h"
#include "cli/output.h"

namespace hutch::cli {

struct RunOptions {
  std::string name;
  std::string template_name = "base";
  unsigned cpus = 1;
  std::string memory = "512M";
  std::string disk;  // empty: the template's size
  bool detach = false;
  bool remove = false;               // --rm: remove the box after the command
  std::vector<std::string> publish;  // -p [ADDR:]HOSTPORT:BOXPORT, published once it runs
  std::string network_policy;        // a preset, a JSON file or '-' (empty: the template's)
  std::vector<std::string> secrets;  // host secrets the box gets placeholders for
  std::string max_exec_time;         // a duration ("10m"); empty: no limit
  std::string idle_pause;            // a duration ("5m", "0": never); empty: hutchd's default
  std::string timeout;               // the box's lifetime ("30m"); empty: none
  std::string on_timeout;            // stop, suspend or remove (default remove)
  std::vector<std::string> volumes;  // -v HOSTDIR:BOXDIR[:ro], host folders shared in
  nlohmann::json policy_document;    // a policy object (--agent's), used over network_policy
  std::string agent;                 // --agent NAME: a coding agent's box (agent.cc)
  std::string workspace;             // --workspace DIR: shared at /workspace for the agent
  ExecOptions exec;
};

// hutch diff and export (diff.cc).
struct DiffOptions {
  std::string from;  // "template" (the default), "image" or a checkpoint's name
  bool all = false;  // show what the built-in rules hide
  std::vector<std::string> ignore;
  bool short_format = false;  // docker diff's "A|C|D PATH"
  std::string patch;          // --patch PATH: that file's unified diff
};
int cmdDiff(const ApiClient& client, const Output& out, const std::string& box,
            const DiffOptions& options);
// Unpacks the added and changed files into `dir` (an existing directory).
int cmdExport(const ApiClient& client, const Output& out, const std::string& box,
              const std::string& dir, const DiffOptions& options);

struct ForkOptions {
  std::string name;
  unsigned count = 1;
};

int cmdRun(const ApiClient& client, const Output& out, const RunOptions& options);
// hutch run --agent NAME [--workspace DIR] [-- ARGS]: the preset's template (made once), policy,
// secrets and command (agent.cc, docs/agents.md).
int cmdRunAgent(const ApiClient& client, const Output& out, RunOptions options);
// hutch agent ls: the presets, built in and the user's, and whether their template is made.
int cmdAgentList(const ApiClient& client, const Output& out);
int cmdExec(const ApiClient& client, const Output& out, const std::string& box,
            const ExecOptions& options);
int cmdList(const ApiClient& client, const Output& out);
int cmdInspect(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes);
int cmdLogs(const ApiClient& client, const Output& out, const std::string& box);
int cmdStart(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes);
// Suspends (memory kept), or with shutdown powers the guest off.
int cmdStop(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes,
            bool shutdown);
// Sets when the box's lifetime ends ("0" or "none": never) and what happens then.
int cmdTimeout(const ApiClient& client, const Output& out, const std::string& box,
               const std::string& duration, const std::string& on_timeout);
int cmdRemove(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes,
              bool force);
int cmdTemplateList(const ApiClient& client, const Output& out);
// Where a new template comes from: its recipe (neither set), a stopped box's disk, or an image.
struct TemplateSource {
  std::string box;
  std::string image;
  std::string archive;        // FILE, DIR (an OCI image layout) or "-" (stdin)
  std::string archive_image;  // the archive's image to use (--image), when it holds several
  bool systemd = false;       // --systemd: the image's systemd is PID 1
};
int cmdTemplateCreate(const ApiClient& client, const Output& out, const std::string& name,
                      const TemplateSource& from);
// Sends from.archive as POST /v1/templates/NAME/archive; its NDJSON lines go to on_line
// (template_archive.cc).
Result<> sendTemplateArchive(const ApiClient& client, const Output& out, const std::string& name,
                             const TemplateSource& from,
                             const std::function<void(const nlohmann::json&)>& on_line);
// The lines of a streamed template making (recipe build, image pull, archive, Dockerfile):
// progress to stderr as it comes (not with --json), then the template or the error.
class TemplateStream {
 public:
  explicit TemplateStream(const Output& out) : out_(out) {}
  void onLine(const nlohmann::json& line);
  // The template, or why there is none (the stream's own failure first).
  Result<nlohmann::json> result(const Result<>& streamed) const;

 private:
  const Output& out_;
  nlohmann::json made_;
  std::optional<Error> failed_;
};
// hutch template build NAME -f Dockerfile [CONTEXT] (build.cc).
struct DockerfileBuild {
  std::string name;
  std::string dockerfile;               // "": CONTEXT/Dockerfile
  std::string context;                  // "": .
  std::vector<std::string> build_args;  // NAME=VALUE, or NAME (its value from the environment)
  std::string target;
  std::string start_cmd;
  std::string ready_cmd;
  std::string network_policy;
  std::vector<std::string> secrets;  // host secrets the RUN steps may use (names)
  bool no_cache = false;
  unsigned cpus = 0;  // 0: hutchd's default for builds
  uint64_t memory_mib = 0;
  uint64_t disk_mib = 0;
};
int cmdTemplateBuildDockerfile(const ApiClient& client, const Output& out,
                               const DockerfileBuild& build);
// hutch registry login -u USER HOST (the password on stdin) | logout HOST | ls.
int cmdRegistryLogin(const ApiClient& client, const Output& out, const std::string& registry,
                     const std::string& username);
int cmdRegistryLogout(const ApiClient& client, const Output& out, const std::string& registry);
int cmdRegistryList(const ApiClient& client, const Output& out);
// Removes the guest image builds nothing uses (POST /v1/images/prune); `keep` a duration.
int cmdImagePrune(const ApiClient& client, const Output& out, bool dry_run,
                  const std::string& keep);
int cmdTemplateRemove(const ApiClient& client, const Output& out,
                      const std::vector<std::string>& names);
int cmdDoctor(const ApiClient& client, const Output& out);
int cmdCp(const ApiClient& client, const Output& out, const CopyOptions& options);

int cmdFork(const ApiClient& client, const Output& out, const std::string& box,
            const ForkOptions& options);
int cmdCheckpoint(const ApiClient& client, const Output& out, const std::string& box,
                  const std::string& name);
int cmdCheckpointList(const ApiClient& client, const Output& out, const std::string& box);
int cmdCheckpointRemove(const ApiClient& client, const Output& out, const std::string& box,
                        const std::vector<std::string>& names);
int cmdRollback(const ApiClient& client, const Output& out, const std::string& box,
                const std::string& checkpoint);
int cmdDiskUsage(const ApiClient& client, const Output& out);
// MCP on stdin/stdout, relayed to hutchd's /mcp (docs/mcp.md).
int cmdMcp(const ApiClient& client);
int cmdPool(const ApiClient& client, const Output& out);
// What running boxes' VMMs use of the host: memory (and its limit), CPU time, tasks, OOM kills.
int cmdStats(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes);

// What runs and listens inside a box (box_io.cc).
struct BoxLogOptions {
  std::string exec_id;  // a detached process's log
  std::string service;  // a service's log
  bool follow = false;
};
// POSTs each "[ADDR:]HOSTPORT:BOXPORT" to /v1/boxes/{box}/ports.
Result<> publishPorts(const ApiClient& client, const std::string& box,
                      const std::vector<std::string>& specs);
int cmdPortAdd(const ApiClient& client, const Output& out, const std::string& box,
               const std::string& spec);
int cmdPortList(const ApiClient& client, const Output& out, const std::string& box);
int cmdPortRemove(const ApiClient& client, const Output& out, const std::string& box,
                  const std::vector<std::string>& ports, const std::string& address);
int cmdExecDetached(const ApiClient& client, const Output& out, const std::string& box,
                    const ExecOptions& options);
int cmdProcesses(const ApiClient& client, const Output& out, const std::string& box);
int cmdKill(const ApiClient& client, const Output& out, const std::string& box,
            const std::vector<std::string>& ids, const std::string& signal);
int cmdServices(const ApiClient& client, const Output& out, const std::string& box);
int cmdBoxLogs(const ApiClient& client, const Output& out, const std::string& box,
               const BoxLogOptions& options);
int cmdImageLoad(const ApiClient& client, const Output& out, const std::string& box,
                 const std::string& file);

// A box's network (network.cc).
// A preset name as a JSON string, or the JSON object in file `arg` ('-': stdin).
Result<nlohmann::json> policyArgument(const std::string& arg);
int cmdPolicySet(const ApiClient& client, const Output& out, const std::string& box,
                 const std::string& file);
int cmdPolicyShow(const ApiClient& client, const Output& out, const std::string& box);
int cmdPolicyLog(const ApiClient& client, const Output& out, const std::string& box, bool follow);
struct SecretOptions {
  std::string name;
  std::vector<std::string> domains;
  std::string header;
  std::string format;
};
int cmdSecretSet(const ApiClient& client, const Output& out, const SecretOptions& options);
int cmdSecretList(const ApiClient& client, const Output& out);
int cmdSecretRemove(const ApiClient& client, const Output& out,
                    const std::vector<std::string>& names);

// API keys (keys.cc).
struct KeyOptions {
  std::string name;
  bool admin = false;
  uint64_t max_boxes = 0;
  uint64_t max_cpus = 0;
  std::string max_memory;  // "4G"
  std::string max_disk;
};
int cmdKeyCreate(const ApiClient& client, const Output& out, const KeyOptions& options);
int cmdKeyList(const ApiClient& client, const Output& out);
// DELETE COLLECTION/NAME for each name (percent-encoded), printing each removed one; the exit
// code of the last failure, 0 when none failed.
int removeEach(const ApiClient& client, const Output& out, std::string_view collection,
               const std::vector<std::string>& names);
int cmdKeyRemove(const ApiClient& client, const Output& out, const std::vector<std::string>& names);

// "512", "512M", "512MiB", "2G", "2GiB" -> MiB.
Result<uint64_t> parseMemoryMib(const std::string& text);
// "500ms", "30s", "10m", "2h", "1d", or a plain number of seconds -> milliseconds. `flag` names
// the option in the error.
Result<uint64_t> parseDurationMs(const std::string& text, std::string_view flag);

// Events and the audit log (observe.cc, docs/observability.md).
struct EventsOptions {
  std::string since;  // a duration back ("10m") or unix seconds
  std::string box;
  std::vector<std::string> types;
  bool follow = false;
};
struct AuditOptions {
  std::string since;
  std::string box;
};
// --since: a duration back from now ("10m") or unix seconds -> unix seconds (0: everything).
Result<int64_t> parseSince(const std::string& text);
int cmdEvents(const ApiClient& client, const Output& out, const EventsOptions& options);
int cmdAudit(const ApiClient& client, const Output& out, const AuditOptions& options);
// Exits 0 when the audit log is intact, 1 when it is not.
int cmdAuditVerify(const ApiClient& client, const Output& out);

// SSH (ssh.cc, docs/ssh.md). ssh-proxy HOST: stdin/stdout relayed to an SSH stream into box
// HOST (BOX.hutch or BOX), OpenSSH's ProxyCommand. ssh-known-hosts HOST: hutchd's host key as a
// known_hosts line for HOST (KnownHostsCommand). ssh-config: the Host *.hutch block, printed or
// (install) written to ~/.ssh/hutch_config and included from ~/.ssh/config. ssh: runs OpenSSH's
// ssh with that block (-o options before the host, the command after).
int cmdSshProxy(const ApiClient& client, const Output& out, const std::string& host);
int cmdSshKnownHosts(const ApiClient& client, const Output& out, const std::string& host);
int cmdSshConfig(const ApiClient& client, const Output& out, bool install);
int cmdSsh(const ApiClient& client, const Output& out, const std::string& box,
           const std::vector<std::string>& command, const std::vector<std::string>& ssh_args);
// hutch key ssh add NAME KEYFILE|-, ls, rm NAME...: the caller's SSH public keys for hutchd
// --listen-ssh.
int cmdSshKeyAdd(const ApiClient& client, const Output& out, const std::string& name,
                 const std::string& file);
int cmdSshKeyList(const ApiClient& client, const Output& out);
int cmdSshKeyRemove(const ApiClient& client, const Output& out,
                    const std::vector<std::string>& names);

}  // namespace hutch::cli

// hutch: the command-line client of hutchd. Every command is a call to the HTTP API; --json
// prints the API's own objects.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands/commands.h"

int main(int argc, char** argv) {
  using namespace hutch::cli;
  CLI::App app{
      "hutch: a VM per AI coding agent. Talks to hutchd over its unix socket, or to a "
      "remote hutchd over HTTPS (--host, HUTCH_HOST, HUTCH_API_KEY)."};
  app.require_subcommand(1);
  std::string socket;
  std::string host;
  std::string ca_cert;
  std::string fingerprint;
  Output out;
  app.add_option("--socket", socket, "hutchd's API socket (env HUTCH_SOCKET)");
  app.add_option("--host", host,
                 "A remote hutchd: https://HOST:PORT (env HUTCH_HOST; the key in HUTCH_API_KEY)");
  app.add_option("--ca-cert", ca_cert,
                 "The CA (PEM) the remote hutchd's certificate chains to (env HUTCH_CA_CERT)");
  app.add_option("--fingerprint", fingerprint,
                 "Pin the remote hutchd's certificate by its SHA-256 (env HUTCH_FINGERPRINT; "
                 "hutch doctor on the server prints it)");
  app.add_flag("--json", out.json, "Print the API's JSON objects instead of tables");
  app.fallthrough();

  RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "Create a box, optionally run a command in it");
  run_cmd->add_option("--name", run.name, "Box name (default: generated)");
  run_cmd->add_option("--template", run.template_name, "Template to boot")->capture_default_str();
  run_cmd->add_option("--cpus", run.cpus, "Virtual CPUs")->capture_default_str();
  run_cmd->add_option("-m,--memory", run.memory, "Guest memory (512M, 2G)")->capture_default_str();
  run_cmd->add_option("--disk", run.disk, "Disk size (8G); the guest filesystem grows to it");
  run_cmd->add_flag("-d,--detach", run.detach, "Print the new box's id and return");
  run_cmd->add_flag("--rm", run.remove, "Remove the box when the command finishes");
  run_cmd->add_flag("-i,--interactive", run.exec.interactive, "Forward stdin to the command");
  run_cmd->add_flag("-t,--tty", run.exec.tty, "Run the command on a terminal (needs one here)");
  // One value per -e (a vector option would otherwise also take the box name that follows).
  run_cmd->add_option("-e,--env", run.exec.env, "Environment KEY=VALUE for the command")
      ->allow_extra_args(false);
  run_cmd->add_option("-p,--publish", run.publish, "Publish [ADDR:]HOSTPORT:BOXPORT (repeatable)")
      ->allow_extra_args(false);
  run_cmd
      ->add_option("-v,--volume", run.volumes,
                   "Share a host folder HOSTDIR:BOXDIR[:ro] (repeatable; host administrator only)")
      ->allow_extra_args(false);
  run_cmd->add_option("--network-policy", run.network_policy,
                      "Egress policy: none, allow-all, debian-mirrors, npm, pypi, or a JSON file "
                      "(default: the template's)");
  run_cmd
      ->add_option("--secret", run.secrets,
                   "A host secret the box gets a placeholder for (repeatable; hutch secret set)")
      ->allow_extra_args(false);
  run_cmd->add_option("--timeout", run.timeout,
                      "The box's lifetime (30m, 2h): when it ends the box is removed, or "
                      "--on-timeout says");
  run_cmd->add_option("--on-timeout", run.on_timeout, "stop, suspend or remove (default)");
  run_cmd->add_option("--idle-pause", run.idle_pause,
                      "Pause the box after this long without work (5m; 0: never; default: "
                      "hutchd's --idle-pause)");
  run_cmd->add_option("--max-exec-time", run.max_exec_time,
                      "Kill any command in the box that runs longer (30s, 10m, 2h; detached "
                      "processes are not limited)");
  run_cmd->add_option("--agent", run.agent,
                      "A coding agent's box: its preset's template (made once), network and "
                      "keys, and its CLI attached (hutch agent ls; arguments after --)");
  run_cmd->add_option("--workspace", run.workspace,
                      "With --agent: a host folder shared at /workspace, where the agent starts");
  run_cmd->add_option("cmd", run.exec.argv, "Command to run after -- (optional)");

  std::string exec_box;
  ExecOptions exec;
  auto* exec_cmd = app.add_subcommand("exec", "Run a command in a running box");
  exec_cmd->add_flag("-i,--interactive", exec.interactive, "Forward stdin to the command");
  exec_cmd->add_flag("-t,--tty", exec.tty, "Run the command on a terminal (needs one here)");
  exec_cmd->add_option("-e,--env", exec.env, "Environment KEY=VALUE")->allow_extra_args(false);
  exec_cmd->add_option("-w,--workdir", exec.cwd, "Working directory in the box");
  exec_cmd->add_option("-u,--user", exec.user, "User name or uid in the box");
  bool exec_detach = false;
  exec_cmd->add_flag("-d,--detach", exec_detach,
                     "Run in the background, output to a log; prints the process id");
  std::string exec_timeout;
  exec_cmd->add_option("--timeout", exec_timeout,
                       "Kill the command if it runs longer (500ms, 30s, 10m); exit 124 then");
  exec_cmd->add_option("box", exec_box, "Box name or id")->required();
  exec_cmd->add_option("cmd", exec.argv, "Command and arguments, after --")->required();

  std::string shell_box;
  ExecOptions shell;
  shell.interactive = true;
  shell.tty = true;
  shell.login_shell = true;
  auto* shell_cmd = app.add_subcommand("shell", "Open a login shell in a running box (exec -it)");
  shell_cmd->add_option("-u,--user", shell.user, "User name or uid in the box");
  shell_cmd->add_option("-w,--workdir", shell.cwd, "Working directory in the box");
  shell_cmd->add_option("-e,--env", shell.env, "Environment KEY=VALUE")->allow_extra_args(false);
  shell_cmd->add_option("box", shell_box, "Box name or id")->required();

  auto* ls_cmd = app.add_subcommand("ls", "List boxes");
  ls_cmd->alias("ps");

  std::vector<std::string> inspect_boxes;
  auto* inspect_cmd = app.add_subcommand("inspect", "Show boxes as JSON");
  inspect_cmd->add_option("box", inspect_boxes, "Box names or ids")->required();

  std::vector<std::string> stats_boxes;
  auto* stats_cmd = app.add_subcommand(
      "stats", "Show what running boxes use of the host: memory, CPU time, tasks (their cgroups)");
  stats_cmd->add_option("box", stats_boxes, "Box names or ids")->required();

  std::string logs_box;
  BoxLogOptions box_logs;
  auto* logs_cmd = app.add_subcommand(
      "logs", "Print a box's console log, or the log of a detached process or a service in it");
  logs_cmd->add_option("--exec", box_logs.exec_id, "A detached process's id (hutch procs BOX)");
  logs_cmd->add_option("--service", box_logs.service, "A service's name (hutch services BOX)");
  logs_cmd->add_flag("-f,--follow", box_logs.follow,
                     "Keep printing what is appended (--exec, "
                     "--service)");
  logs_cmd->add_option("box", logs_box, "Box name or id")->required();

  std::string port_box;
  std::string port_spec;
  auto* port_cmd = app.add_subcommand(
      "port", "Publish a box port on the host: 'port BOX [ADDR:]HOSTPORT:BOXPORT'; 'port ls|rm'");
  auto* port_ls = port_cmd->add_subcommand("ls", "List a box's published ports");
  port_ls->add_option("box", port_box, "Box name or id")->required();
  std::vector<std::string> port_rm_ports;
  std::string port_rm_address;
  auto* port_rm = port_cmd->add_subcommand("rm", "Unpublish host ports of a box");
  port_rm->add_option("--address", port_rm_address, "Only the forward on this host address");
  port_rm->add_option("box", port_box, "Box name or id")->required();
  port_rm->add_option("port", port_rm_ports, "Host ports")->required();
  port_cmd->add_option("box", port_box, "The box");
  port_cmd->add_option("spec", port_spec, "[ADDR:]HOSTPORT:BOXPORT (ADDR defaults to 127.0.0.1)");

  std::string procs_box;
  auto* procs_cmd = app.add_subcommand("procs", "List a box's detached processes (hutch exec -d)");
  procs_cmd->alias("top");
  procs_cmd->add_option("box", procs_box, "Box name or id")->required();

  std::string kill_box;
  std::vector<std::string> kill_ids;
  std::string kill_signal = "TERM";
  auto* kill_cmd = app.add_subcommand("kill", "Signal detached processes (default SIGTERM)");
  kill_cmd->add_option("-s,--signal", kill_signal, "Signal name or number")->capture_default_str();
  kill_cmd->add_option("box", kill_box, "Box name or id")->required();
  kill_cmd->add_option("id", kill_ids, "Process ids (hutch procs BOX)")->required();

  std::string services_box;
  auto* services_cmd = app.add_subcommand("services", "List the services a box's image runs");
  services_cmd->add_option("box", services_box, "Box name or id")->required();

  std::string image_box;
  std::string image_file;
  auto* image_cmd = app.add_subcommand(
      "image", "Images: container images into a box (load), guest image builds (prune)");
  image_cmd->require_subcommand(1);
  auto* image_load = image_cmd->add_subcommand(
      "load", "docker load a tarball (docker save or OCI archive; '-' for stdin) into a box");
  image_load->add_option("box", image_box, "Box name or id (docker template)")->required();
  image_load->add_option("file", image_file, "The archive")->required();
  bool prune_dry_run = false;
  std::string prune_keep;
  auto* image_prune = image_cmd->add_subcommand(
      "prune",
      "Remove the guest image builds in hutchd's cache that no template, box or snapshot uses");
  image_prune->add_flag("--dry-run", prune_dry_run, "Say what would go; remove nothing");
  image_prune->add_option("--keep", prune_keep,
                          "Keep builds started from within this long (default 24h; 0: none)");

  std::vector<std::string> start_boxes;
  auto* start_cmd = app.add_subcommand(
      "start", "Resume suspended boxes; boot stopped or failed ones from their disks");
  start_cmd->add_option("box", start_boxes, "Box names or ids")->required();

  std::vector<std::string> stop_boxes;
  bool stop_shutdown = false;
  auto* stop_cmd = app.add_subcommand(
      "stop", "Suspend boxes: memory and processes kept on disk, nothing else used");
  stop_cmd->add_flag("--shutdown", stop_shutdown,
                     "Power the guest off cleanly instead (processes end; the disk is kept)");
  stop_cmd->add_option("box", stop_boxes, "Box names or ids")->required();

  std::string timeout_box;
  std::string timeout_value;
  std::string timeout_action;
  auto* timeout_cmd = app.add_subcommand(
      "timeout", "Set when a box's lifetime ends, from now: 'timeout BOX 30m' ('0': never)");
  timeout_cmd->add_option("--on-timeout", timeout_action, "stop, suspend or remove");
  timeout_cmd->add_option("box", timeout_box, "Box name or id")->required();
  timeout_cmd->add_option("duration", timeout_value, "30s, 10m, 2h, 1d; 0 for none")->required();

  std::vector<std::string> rm_boxes;
  bool force = false;
  auto* rm_cmd = app.add_subcommand("rm", "Remove boxes and every file they own");
  rm_cmd->add_flag("-f,--force", force, "Remove running boxes too (kills them)");
  rm_cmd->add_option("box", rm_boxes, "Box names or ids")->required();

  auto* template_cmd = app.add_subcommand("template", "Templates boxes are made from");
  template_cmd->require_subcommand(1);
  auto* template_ls = template_cmd->add_subcommand("ls", "List templates");
  std::string template_name;
  auto* template_build = template_cmd->add_subcommand(
      "build", "Build a template from its recipe, or from a Dockerfile (-f FILE and/or CONTEXT)");
  template_build
      ->add_option("name", template_name, "Recipe name (images/NAME), or the new template's")
      ->required();
  DockerfileBuild dockerfile_build;
  template_build->add_option("context", dockerfile_build.context,
                             "The build context: a directory (with -f, default .)");
  template_build->add_option("-f,--file", dockerfile_build.dockerfile,
                             "The Dockerfile (default CONTEXT/Dockerfile)");
  template_build->add_option("--build-arg", dockerfile_build.build_args,
                             "NAME=VALUE for an ARG (repeatable)");
  template_build->add_option("--target", dockerfile_build.target, "The stage to build");
  template_build->add_option("--start-cmd", dockerfile_build.start_cmd,
                             "A command started in the template's snapshot (a server)");
  template_build->add_option("--ready-cmd", dockerfile_build.ready_cmd,
                             "Polled until it exits 0 before the snapshot is taken");
  template_build->add_option("--network-policy", dockerfile_build.network_policy,
                             "Egress of the build's RUN steps (default: the host's package "
                             "registries: debian-mirrors, npm, pypi)");
  template_build->add_option("--secret", dockerfile_build.secrets,
                             "A host secret the RUN steps may use, as a box's (repeatable): "
                             "never in the template; the steps are not cached");
  template_build->add_flag("--no-cache", dockerfile_build.no_cache, "Run every step again");
  template_build->add_option("--cpus", dockerfile_build.cpus, "vCPUs of the build box");
  std::string build_memory;
  template_build->add_option("--memory", build_memory, "Memory of the build box (1g, 2048m)");
  std::string build_disk;
  template_build->add_option("--disk", build_disk, "Disk of the build box (default 8g)");
  std::string template_from;
  std::string template_image;
  auto* template_create = template_cmd->add_subcommand(
      "create", "A new template from a stopped box's disk, an OCI image or an image archive");
  auto* from_box_opt = template_create->add_option("--from", template_from, "The stopped box");
  auto* from_image_opt = template_create->add_option(
      "--from-image", template_image,
      "An image in a registry (python:3.12, registry.example:5000/team/app:1, ...@sha256:...)");
  from_box_opt->excludes(from_image_opt);
  std::string template_archive;
  std::string template_archive_image;
  auto* from_archive_opt = template_create->add_option(
      "--from-archive", template_archive,
      "An image archive: a `docker save` tar or an OCI archive (plain or compressed), an OCI "
      "image layout directory, or - for stdin");
  from_archive_opt->excludes(from_box_opt)->excludes(from_image_opt);
  template_create
      ->add_option("--image", template_archive_image,
                   "Of an archive holding several images, the one to use (a tag, or @N)")
      ->needs(from_archive_opt);
  bool template_systemd = false;
  template_create->add_flag(
      "--systemd", template_systemd,
      "Boot the image's own systemd as PID 1, with hutch-agent as its service (as the systemd "
      "template does); the image must have systemd");
  template_create->callback(
      [&template_from, &template_image, &template_archive, &template_systemd] {
        if (template_from.empty() && template_image.empty() && template_archive.empty()) {
          throw CLI::RequiredError("--from BOX, --from-image REF or --from-archive FILE");
        }
        if (template_systemd && !template_from.empty()) {
          throw CLI::ValidationError(
              "--systemd", "is for a template from an image (--from-image or --from-archive)");
        }
      });
  template_create->add_option("name", template_name, "New template name")->required();
  std::vector<std::string> template_rm_names;
  auto* template_rm = template_cmd->add_subcommand("rm", "Remove templates no box uses");
  template_rm->add_option("name", template_rm_names, "Template names")->required();

  auto* registry_cmd =
      app.add_subcommand("registry", "Credentials hutchd pulls images with (kept on the host)");
  registry_cmd->require_subcommand(1);
  std::string registry_host;
  std::string registry_user;
  auto* registry_login =
      registry_cmd->add_subcommand("login", "Keep a registry's credentials (password on stdin)");
  registry_login->add_option("-u,--username", registry_user, "The user name")->required();
  bool password_stdin = true;  // the only way: a password is never a flag's value
  registry_login->add_flag("--password-stdin", password_stdin,
                           "Read the password or token from stdin (the default)");
  registry_login->add_option("registry", registry_host, "HOST[:PORT], or docker.io")->required();
  auto* registry_logout = registry_cmd->add_subcommand("logout", "Forget a registry's credentials");
  registry_logout->add_option("registry", registry_host, "HOST[:PORT]")->required();
  auto* registry_ls = registry_cmd->add_subcommand("ls", "Registries hutchd has credentials for");

  auto* doctor_cmd = app.add_subcommand("doctor", "Check this host: acceleration, QEMU, hutchd");

  CopyOptions cp;
  auto* cp_cmd = app.add_subcommand("cp", "Copy files and directories between a box and here");
  cp_cmd->add_flag("-a,--archive", cp.archive, "Keep uid/gid (default: the receiving side's)");
  cp_cmd->add_flag("--progress", cp.progress, "Show progress even if stderr is not a terminal");
  cp_cmd->add_flag("-q,--quiet", cp.quiet, "No progress, no summary");
  cp_cmd->add_option("src", cp.source, "SRC_PATH or BOX:SRC_PATH")->required();
  cp_cmd->add_option("dst", cp.destination, "DST_PATH or BOX:DST_PATH")->required();

  std::string fork_box;
  ForkOptions fork;
  auto* fork_cmd = app.add_subcommand(
      "fork", "Copy a running box, processes and unsaved files included, into new boxes");
  fork_cmd->add_option("--name", fork.name, "Name of the new box (default: generated)");
  fork_cmd->add_option("-n,--count", fork.count, "How many copies")->capture_default_str();
  fork_cmd->add_option("box", fork_box, "The running box")->required();

  std::string checkpoint_box;
  std::string checkpoint_name;
  auto* checkpoint_cmd = app.add_subcommand(
      "checkpoint", "Save a running box's disk and memory; 'checkpoint ls|rm' manage them");
  checkpoint_cmd->add_option("--name", checkpoint_name, "Checkpoint name (default: generated)");
  auto* checkpoint_ls = checkpoint_cmd->add_subcommand("ls", "List a box's checkpoints");
  checkpoint_ls->add_option("box", checkpoint_box, "Box name or id")->required();
  std::vector<std::string> checkpoint_rm_names;
  auto* checkpoint_rm = checkpoint_cmd->add_subcommand("rm", "Remove checkpoints");
  checkpoint_rm->add_option("box", checkpoint_box, "Box name or id")->required();
  checkpoint_rm->add_option("name", checkpoint_rm_names, "Checkpoint names")->required();
  // `hutch checkpoint BOX` (no subcommand) makes one.
  checkpoint_cmd->add_option("box", checkpoint_box, "The running box");

  std::string rollback_box;
  std::string rollback_to;
  auto* rollback_cmd = app.add_subcommand(
      "rollback", "Return a box to a checkpoint: its files and its running processes");
  rollback_cmd->add_option("box", rollback_box, "Box name or id")->required();
  rollback_cmd->add_option("checkpoint", rollback_to, "Checkpoint name")->required();

  std::string diff_box;
  std::string export_dir;
  hutch::cli::DiffOptions diff;
  auto* diff_cmd = app.add_subcommand(
      "diff", "The files added, changed and deleted in a box since its template or a checkpoint");
  diff_cmd->add_option("box", diff_box, "Box name or id (running, stopped or suspended)")
      ->required();
  auto* export_cmd = app.add_subcommand(
      "export",
      "Copy the files added and changed in a box since its template or a checkpoint "
      "into a host directory");
  export_cmd->add_option("box", diff_box, "Box name or id")->required();
  export_cmd->add_option("dir", export_dir, "An existing host directory")->required();
  for (auto* cmd : {diff_cmd, export_cmd}) {
    cmd->add_option("--from", diff.from,
                    "Compare with: template (default), image (the template's disk before its "
                    "first boot) or a checkpoint's name");
    cmd->add_flag("--all", diff.all,
                  "Also show what is hidden by default (hutch's own files, apt lists, caches)");
    cmd->add_option("--ignore", diff.ignore,
                    "Hide paths matching a pattern: '/home/hutch/.cache' (and all below), "
                    "'*.log' (any name); repeatable")
        ->allow_extra_args(false);
  }
  diff_cmd->add_flag("--short", diff.short_format, "docker diff's format: 'A|C|D PATH' lines");
  diff_cmd->add_option("--patch", diff.patch, "A unified diff of this file (an absolute path)");

  std::string policy_box;
  std::string policy_file;
  bool policy_follow = false;
  auto* policy_cmd =
      app.add_subcommand("policy", "A box's egress policy: 'policy set|show|log BOX'");
  policy_cmd->require_subcommand(1);
  auto* policy_set = policy_cmd->add_subcommand("set", "Change a box's policy (live if it runs)");
  policy_set->add_option("box", policy_box, "Box name or id")->required();
  policy_set
      ->add_option("policy", policy_file,
                   "A JSON file, '-' for stdin, or none, allow-all, debian-mirrors, npm, pypi")
      ->required();
  auto* policy_show = policy_cmd->add_subcommand("show", "Show a box's policy");
  policy_show->add_option("box", policy_box, "Box name or id")->required();
  auto* policy_log = policy_cmd->add_subcommand(
      "log", "What a box reached or was refused: time, destination, decision, bytes");
  policy_log->add_flag("-f,--follow", policy_follow, "Keep printing new entries");
  policy_log->add_option("box", policy_box, "Box name or id")->required();

  auto* agent_cmd =
      app.add_subcommand("agent", "Coding agents in boxes (hutch run --agent NAME): 'agent ls'");
  agent_cmd->require_subcommand(1);
  auto* agent_ls = agent_cmd->add_subcommand(
      "ls", "The agent presets (built in, and NAME.json files in the agents directory)");

  SecretOptions secret;
  auto* secret_cmd = app.add_subcommand(
      "secret", "Host secrets boxes use without seeing them: 'secret set|ls|rm'");
  secret_cmd->require_subcommand(1);
  auto* secret_set =
      secret_cmd->add_subcommand("set", "Store a secret on the host; its value is read from stdin");
  secret_set
      ->add_option("--domain", secret.domains,
                   "Where it may be sent (repeatable; *.example.com for subdomains)")
      ->required()
      ->allow_extra_args(false);
  secret_set->add_option("--header", secret.header,
                         "Set this request header (e.g. Authorization); default: replace the "
                         "placeholder wherever it appears in headers");
  secret_set->add_option("--format", secret.format,
                         "The header's value, with {value} (default: {value})");
  secret_set->add_option("name", secret.name, "NAME (A-Z, 0-9, _): the box's variable")->required();
  auto* secret_ls = secret_cmd->add_subcommand("ls", "List secrets (never their values)");
  std::vector<std::string> secret_rm_names;
  auto* secret_rm = secret_cmd->add_subcommand("rm", "Remove secrets");
  secret_rm->add_option("name", secret_rm_names, "Secret names")->required();

  KeyOptions key;
  auto* key_cmd = app.add_subcommand(
      "key", "API keys of hutchd's TCP listener: 'key create|ls|rm'; SSH keys: 'key ssh ...'");
  key_cmd->require_subcommand(1);
  auto* key_create = key_cmd->add_subcommand("create", "Make a key; it is printed once");
  key_create->add_flag("--admin", key.admin, "It sees and manages every owner's boxes and keys");
  key_create->add_option("--max-boxes", key.max_boxes, "At most this many boxes (0: no limit)");
  key_create->add_option("--max-cpus", key.max_cpus, "At most this many CPUs in running boxes");
  key_create->add_option("--max-memory", key.max_memory, "At most this much memory (e.g. 8G)");
  key_create->add_option("--max-disk", key.max_disk, "At most this much disk (e.g. 100G)");
  key_create->add_option("name", key.name, "The key's name (the owner boxes show)")->required();
  auto* key_ls = key_cmd->add_subcommand("ls", "List keys (never the keys themselves)");
  std::vector<std::string> key_rm_names;
  auto* key_rm = key_cmd->add_subcommand("rm", "Remove keys; their open sessions end at once");
  key_rm->add_option("name", key_rm_names, "Key names")->required();
  auto* key_ssh = key_cmd->add_subcommand(
      "ssh", "Your SSH public keys for hutchd --listen-ssh: 'key ssh add|ls|rm' (docs/ssh.md)");
  key_ssh->require_subcommand(1);
  std::string ssh_key_name;
  std::string ssh_key_file;
  auto* key_ssh_add =
      key_ssh->add_subcommand("add", "Register a public key (a .pub file, '-': stdin)");
  key_ssh_add->add_option("name", ssh_key_name, "The key's name")->required();
  key_ssh_add->add_option("keyfile", ssh_key_file, "The public key file (~/.ssh/id_ed25519.pub)")
      ->required();
  auto* key_ssh_ls = key_ssh->add_subcommand("ls", "List your SSH keys");
  std::vector<std::string> ssh_key_rm_names;
  auto* key_ssh_rm = key_ssh->add_subcommand("rm", "Remove SSH keys");
  key_ssh_rm->add_option("name", ssh_key_rm_names, "Key names")->required();

  auto* df_cmd =
      app.add_subcommand("df", "Disk space used by templates, snapshots, checkpoints and boxes");
  auto* pool_cmd = app.add_subcommand(
      "pool", "The warm pools: restored, warmed-up VMs waiting for creates, per template and size");

  EventsOptions events;
  auto* events_cmd = app.add_subcommand(
      "events",
      "What happened to boxes, commands, ports, policies and keys (docs/observability.md)");
  events_cmd->add_option("--since", events.since,
                         "Only events since: 30s, 10m, 2h, 1d ago, or unix seconds");
  events_cmd->add_option("--box", events.box,
                         "Only one box's (name, id, or the id of a removed box)");
  events_cmd
      ->add_option("--type", events.types, "Only these types; 'box.' matches a prefix (repeatable)")
      ->allow_extra_args(false);
  events_cmd->add_flag("-f,--follow", events.follow, "Keep printing events as they happen");

  AuditOptions audit;
  auto* audit_cmd = app.add_subcommand(
      "audit",
      "The audit log: every exec, file operation, secret use, policy, key and secret change");
  audit_cmd->add_option("--since", audit.since,
                        "Only records since: 30s, 10m, 2h, 1d ago, or unix seconds");
  audit_cmd->add_option("--box", audit.box,
                        "Only one box's (name, id, or the id of a removed box)");
  auto* audit_verify = audit_cmd->add_subcommand(
      "verify", "Check the audit log's hash chain: whether it is intact, and where it breaks");

  auto* mcp_cmd = app.add_subcommand(
      "mcp",
      "Serve hutch's tools to an MCP client on stdin/stdout (claude mcp add hutch -- hutch mcp); "
      "see docs/mcp.md");

  std::string ssh_host;
  auto* ssh_proxy_cmd = app.add_subcommand(
      "ssh-proxy", "Relay stdin/stdout to SSH in a box: OpenSSH's ProxyCommand (docs/ssh.md)");
  ssh_proxy_cmd->add_option("host", ssh_host, "BOX.hutch or BOX")->required();
  auto* ssh_known_cmd = app.add_subcommand(
      "ssh-known-hosts", "Print hutchd's SSH host key as a known_hosts line for HOST");
  ssh_known_cmd->add_option("host", ssh_host, "The host name ssh checks (%H)")->required();
  bool ssh_install = false;
  auto* ssh_config_cmd = app.add_subcommand(
      "ssh-config", "Print the OpenSSH block that makes 'ssh BOX.hutch' work (docs/ssh.md)");
  ssh_config_cmd->add_flag("--install", ssh_install,
                           "Write it to ~/.ssh/hutch_config and Include it from ~/.ssh/config");
  std::vector<std::string> ssh_command;
  std::vector<std::string> ssh_options;
  auto* ssh_cmd =
      app.add_subcommand("ssh", "Run OpenSSH's ssh into a box (hutch ssh BOX [-- CMD...])");
  ssh_cmd->add_option("-o,--option", ssh_options, "An ssh -o option (repeatable)")
      ->allow_extra_args(false);
  ssh_cmd->add_option("box", ssh_host, "The box (name or id)")->required();
  ssh_cmd->add_option("cmd", ssh_command, "Command to run after -- (default: a shell)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 64;  // EX_USAGE, as for other invalid arguments
  }

  auto endpoint = resolveEndpoint(host, socket, ca_cert, fingerprint);
  if (!endpoint) return reportError(out, endpoint.error());
  ApiClient client(std::move(*endpoint));
  if (run_cmd->parsed()) {
    // Checked before the box is created, not after.
    if (run.exec.tty && run.exec.argv.empty()) {
      return reportError(out,
                         hutch::Error(hutch::Errc::kInvalidArgument,
                                      "-t needs a command after --; for a shell in a new box run "
                                      "'hutch run --name N' then 'hutch shell N'"));
    }
    if (auto tty = checkTerminal(run.exec); !tty) return reportError(out, tty.error());
    if (!run.agent.empty()) {
      if (run_cmd->count("--template") > 0 || run_cmd->count("--network-policy") > 0) {
        return reportError(out, hutch::Error(hutch::Errc::kInvalidArgument,
                                             "--agent picks the template and the network policy "
                                             "from its preset (hutch agent ls); copy the preset "
                                             "to change them"));
      }
      return cmdRunAgent(client, out, run);
    }
    if (!run.workspace.empty()) {
      return reportError(out, hutch::Error(hutch::Errc::kInvalidArgument,
                                           "--workspace goes with --agent; share a folder into "
                                           "any box with -v HOSTDIR:BOXDIR"));
    }
    return cmdRun(client, out, run);
  }
  if (agent_ls->parsed()) return cmdAgentList(client, out);
  if (exec_cmd->parsed()) {
    if (!exec_timeout.empty()) {
      if (exec_detach) {
        return reportError(out, hutch::Error(hutch::Errc::kInvalidArgument,
                                             "--timeout does not apply to -d: a detached "
                                             "process runs until it ends or is killed"));
      }
      auto timeout = parseDurationMs(exec_timeout, "--timeout");
      if (!timeout) return reportError(out, timeout.error());
      exec.timeout_ms = *timeout;
    }
    if (exec_detach) return cmdExecDetached(client, out, exec_box, exec);
    return cmdExec(client, out, exec_box, exec);
  }
  if (shell_cmd->parsed()) return cmdExec(client, out, shell_box, shell);
  if (ls_cmd->parsed()) return cmdList(client, out);
  if (inspect_cmd->parsed()) return cmdInspect(client, out, inspect_boxes);
  if (logs_cmd->parsed()) {
    if (!box_logs.exec_id.empty() && !box_logs.service.empty()) {
      return reportError(
          out, hutch::Error(hutch::Errc::kInvalidArgument, "Give --exec or --service, not both"));
    }
    if (!box_logs.exec_id.empty() || !box_logs.service.empty()) {
      return cmdBoxLogs(client, out, logs_box, box_logs);
    }
    if (box_logs.follow) {
      return reportError(out, hutch::Error(hutch::Errc::kInvalidArgument,
                                           "-f follows the log of --exec ID or --service NAME"));
    }
    return cmdLogs(client, out, logs_box);
  }
  if (port_ls->parsed()) return cmdPortList(client, out, port_box);
  if (port_rm->parsed())
    return cmdPortRemove(client, out, port_box, port_rm_ports, port_rm_address);
  if (port_cmd->parsed()) {
    if (port_box.empty() || port_spec.empty()) {
      return reportError(out, hutch::Error(hutch::Errc::kInvalidArgument,
                                           "Usage: 'hutch port BOX [ADDR:]HOSTPORT:BOXPORT', "
                                           "'hutch port ls BOX', 'hutch port rm BOX HOSTPORT'"));
    }
    return cmdPortAdd(client, out, port_box, port_spec);
  }
  if (procs_cmd->parsed()) return cmdProcesses(client, out, procs_box);
  if (kill_cmd->parsed()) return cmdKill(client, out, kill_box, kill_ids, kill_signal);
  if (services_cmd->parsed()) return cmdServices(client, out, services_box);
  if (image_load->parsed()) return cmdImageLoad(client, out, image_box, image_file);
  if (image_prune->parsed()) return cmdImagePrune(client, out, prune_dry_run, prune_keep);
  if (stats_cmd->parsed()) return cmdStats(client, out, stats_boxes);
  if (start_cmd->parsed()) return cmdStart(client, out, start_boxes);
  if (stop_cmd->parsed()) return cmdStop(client, out, stop_boxes, stop_shutdown);
  if (timeout_cmd->parsed()) {
    return cmdTimeout(client, out, timeout_box, timeout_value, timeout_action);
  }
  if (rm_cmd->parsed()) return cmdRemove(client, out, rm_boxes, force);
  if (template_ls->parsed()) return cmdTemplateList(client, out);
  if (template_build->parsed()) {
    const bool dockerfile =
        !dockerfile_build.dockerfile.empty() || !dockerfile_build.context.empty();
    if (!dockerfile) {
      for (const char* option :
           {"--build-arg", "--target", "--start-cmd", "--ready-cmd", "--network-policy", "--secret",
            "--no-cache", "--cpus", "--memory", "--disk"}) {
        if (template_build->count(option) > 0) {
          return reportError(
              out, hutch::Error(hutch::Errc::kInvalidArgument,
                                std::string(option) + " is for Dockerfile builds: give -f FILE or "
                                                      "a CONTEXT directory"));
        }
      }
      return cmdTemplateCreate(client, out, template_name, {});
    }
    dockerfile_build.name = template_name;
    if (!build_memory.empty()) {
      auto mib = parseMemoryMib(build_memory);
      if (!mib) return reportError(out, mib.error());
      dockerfile_build.memory_mib = *mib;
    }
    if (!build_disk.empty()) {
      auto mib = parseMemoryMib(build_disk);
      if (!mib) return reportError(out, mib.error());
      dockerfile_build.disk_mib = *mib;
    }
    return cmdTemplateBuildDockerfile(client, out, dockerfile_build);
  }
  if (template_create->parsed()) {
    return cmdTemplateCreate(client, out, template_name,
                             {.box = template_from,
                              .image = template_image,
                              .archive = template_archive,
                              .archive_image = template_archive_image,
                              .systemd = template_systemd});
  }
  if (template_rm->parsed()) return cmdTemplateRemove(client, out, template_rm_names);
  if (registry_login->parsed()) return cmdRegistryLogin(client, out, registry_host, registry_user);
  if (registry_logout->parsed()) return cmdRegistryLogout(client, out, registry_host);
  if (registry_ls->parsed()) return cmdRegistryList(client, out);
  if (doctor_cmd->parsed()) return cmdDoctor(client, out);
  if (cp_cmd->parsed()) return cmdCp(client, out, cp);
  if (fork_cmd->parsed()) return cmdFork(client, out, fork_box, fork);
  if (checkpoint_ls->parsed()) return cmdCheckpointList(client, out, checkpoint_box);
  if (checkpoint_rm->parsed()) {
    return cmdCheckpointRemove(client, out, checkpoint_box, checkpoint_rm_names);
  }
  if (checkpoint_cmd->parsed()) {
    if (checkpoint_box.empty()) {
      return reportError(out, hutch::Error(hutch::Errc::kInvalidArgument,
                                           "Name the box: 'hutch checkpoint BOX [--name NAME]', "
                                           "'hutch checkpoint ls BOX' or 'hutch checkpoint rm BOX "
                                           "NAME'"));
    }
    return cmdCheckpoint(client, out, checkpoint_box, checkpoint_name);
  }
  if (rollback_cmd->parsed()) return cmdRollback(client, out, rollback_box, rollback_to);
  if (diff_cmd->parsed()) return cmdDiff(client, out, diff_box, diff);
  if (export_cmd->parsed()) return cmdExport(client, out, diff_box, export_dir, diff);
  if (df_cmd->parsed()) return cmdDiskUsage(client, out);
  if (pool_cmd->parsed()) return cmdPool(client, out);
  if (mcp_cmd->parsed()) return cmdMcp(client);
  if (ssh_proxy_cmd->parsed()) return cmdSshProxy(client, out, ssh_host);
  if (ssh_known_cmd->parsed()) return cmdSshKnownHosts(client, out, ssh_host);
  if (ssh_config_cmd->parsed()) return cmdSshConfig(client, out, ssh_install);
  if (ssh_cmd->parsed()) {
    std::vector<std::string> args;
    for (const std::string& o : ssh_options) {
      args.emplace_back("-o");
      args.push_back(o);
    }
    return cmdSsh(client, out, ssh_host, ssh_command, args);
  }
  if (policy_set->parsed()) return cmdPolicySet(client, out, policy_box, policy_file);
  if (policy_show->parsed()) return cmdPolicyShow(client, out, policy_box);
  if (policy_log->parsed()) return cmdPolicyLog(client, out, policy_box, policy_follow);
  if (secret_set->parsed()) return cmdSecretSet(client, out, secret);
  if (secret_ls->parsed()) return cmdSecretList(client, out);
  if (secret_rm->parsed()) return cmdSecretRemove(client, out, secret_rm_names);
  if (key_create->parsed()) return cmdKeyCreate(client, out, key);
  if (key_ls->parsed()) return cmdKeyList(client, out);
  if (key_rm->parsed()) return cmdKeyRemove(client, out, key_rm_names);
  if (key_ssh_add->parsed()) return cmdSshKeyAdd(client, out, ssh_key_name, ssh_key_file);
  if (key_ssh_ls->parsed()) return cmdSshKeyList(client, out);
  if (key_ssh_rm->parsed()) return cmdSshKeyRemove(client, out, ssh_key_rm_names);
  if (events_cmd->parsed()) return cmdEvents(client, out, events);
  if (audit_verify->parsed()) return cmdAuditVerify(client, out);
  if (audit_cmd->parsed()) return cmdAudit(client, out, audit);
  return 64;
}

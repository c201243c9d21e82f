// hutch: the command-line client of hutchd. Every command is a call to the HTTP API; --json
// prints the API's own objects.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands/commands.h"

int main(int argc, char** argv) {
  using namespace hutch::cli;
  CLI::App app{"hutch: a VM per AI coding agent. Talks to hutchd over its unix socket."};
  app.require_subcommand(1);
  std::string socket = defaultSocketPath();
  Output out;
  app.add_option("--socket", socket, "hutchd's API socket (env HUTCH_SOCKET)");
  app.add_flag("--json", out.json, "Print the API's JSON objects instead of tables");
  app.fallthrough();

  RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "Create a box, optionally run a command in it");
  run_cmd->add_option("--name", run.name, "Box name (default: generated)");
  run_cmd->add_option("--template", run.template_name, "Template to boot")->capture_default_str();
  run_cmd->add_option("--cpus", run.cpus, "Virtual CPUs")->capture_default_str();
  run_cmd->add_option("-m,--memory", run.memory, "Guest memory (512M, 2G)")->capture_default_str();
  run_cmd->add_flag("-d,--detach", run.detach, "Print the new box's id and return");
  run_cmd->add_flag("--rm", run.remove, "Remove the box when the command finishes");
  run_cmd->add_flag("-i,--interactive", run.exec.interactive, "Forward stdin to the command");
  run_cmd->add_option("-e,--env", run.exec.env, "Environment KEY=VALUE for the command");
  run_cmd->add_option("cmd", run.exec.argv, "Command to run after -- (optional)");

  std::string exec_box;
  ExecOptions exec;
  auto* exec_cmd = app.add_subcommand("exec", "Run a command in a running box");
  exec_cmd->add_flag("-i,--interactive", exec.interactive, "Forward stdin to the command");
  exec_cmd->add_option("-e,--env", exec.env, "Environment KEY=VALUE");
  exec_cmd->add_option("-w,--workdir", exec.cwd, "Working directory in the box");
  exec_cmd->add_option("-u,--user", exec.user, "User name or uid in the box");
  exec_cmd->add_option("box", exec_box, "Box name or id")->required();
  exec_cmd->add_option("cmd", exec.argv, "Command and arguments, after --")->required();

  auto* ls_cmd = app.add_subcommand("ls", "List boxes");
  ls_cmd->alias("ps");

  std::vector<std::string> inspect_boxes;
  auto* inspect_cmd = app.add_subcommand("inspect", "Show boxes as JSON");
  inspect_cmd->add_option("box", inspect_boxes, "Box names or ids")->required();

  std::string logs_box;
  auto* logs_cmd = app.add_subcommand("logs", "Print a box's console log");
  logs_cmd->add_option("box", logs_box, "Box name or id")->required();

  std::vector<std::string> stop_boxes;
  auto* stop_cmd = app.add_subcommand("stop", "Shut boxes down cleanly");
  stop_cmd->add_option("box", stop_boxes, "Box names or ids")->required();

  std::vector<std::string> rm_boxes;
  bool force = false;
  auto* rm_cmd = app.add_subcommand("rm", "Remove boxes and every file they own");
  rm_cmd->add_flag("-f,--force", force, "Remove running boxes too (kills them)");
  rm_cmd->add_option("box", rm_boxes, "Box names or ids")->required();

  auto* doctor_cmd = app.add_subcommand("doctor", "Check this host: acceleration, QEMU, hutchd");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 64;  // EX_USAGE, as for other invalid arguments
  }

  ApiClient client(socket);
  if (run_cmd->parsed()) return cmdRun(client, out, run);
  if (exec_cmd->parsed()) return cmdExec(client, out, exec_box, exec);
  if (ls_cmd->parsed()) return cmdList(client, out);
  if (inspect_cmd->parsed()) return cmdInspect(client, out, inspect_boxes);
  if (logs_cmd->parsed()) return cmdLogs(client, out, logs_box);
  if (stop_cmd->parsed()) return cmdStop(client, out, stop_boxes);
  if (rm_cmd->parsed()) return cmdRemove(client, out, rm_boxes, force);
  if (doctor_cmd->parsed()) return cmdDoctor(client, out);
  return 64;
}

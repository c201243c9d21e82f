// Runs a command in a box over an upgraded API connection: forwards stdin, writes the box's
// stdout and stderr to ours, and returns the command's exit status.
//
// With tty the command runs on a pseudo-terminal in the box: its stdout and stderr arrive merged
// on our stdout, our terminal is put in raw mode while interactive (so ^C, ^Z, ^D are bytes the
// box's terminal interprets) and its window size follows ours (SIGWINCH -> kResize).
// Without raw mode, SIGINT (^C) is forwarded to the command as a signal, and hutch keeps waiting
// for its exit status; SIGTERM, SIGHUP and SIGQUIT end hutch (128+N), which ends the command.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "cli/api_client.h"

namespace hutch::cli {

struct ExecOptions {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE
  std::string cwd;
  std::string user;
  bool interactive = false;  // forward our stdin
  bool tty = false;          // a terminal in the box; needs a terminal on our stdin
  bool login_shell = false;  // run the user's login shell (argv empty): `hutch shell`
  uint64_t timeout_ms = 0;   // hutchd kills the command after this long (0: no limit)
};

// -t needs a terminal on stdin: kInvalidArgument ("the input device is not a TTY") otherwise.
Result<> checkTerminal(const ExecOptions& options);

// The command's exit code (128+N if killed by signal N; 127 if it could not be found, 126 if it
// could not be started), or an Error if hutch itself failed.
Result<int> runExec(const ApiClient& client, const std::string& box, const ExecOptions& options);

}  // namespace hutch::cli

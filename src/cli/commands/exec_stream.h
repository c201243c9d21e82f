// Runs a command in a box over an upgraded API connection: forwards stdin, writes the box's
// stdout and stderr to ours, and returns the command's exit status.
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
};

// The command's exit code (128+N if killed by signal N; 127 if it could not be found, 126 if it
// could not be started), or an Error if hutch itself failed.
Result<int> runExec(const ApiClient& client, const std::string& box, const ExecOptions& options);

}  // namespace hutch::cli

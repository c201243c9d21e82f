// One function per CLI verb. Each returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "cli/commands/exec_stream.h"
#include "cli/output.h"

namespace hutch::cli {

struct RunOptions {
  std::string name;
  std::string template_name = "base";
  unsigned cpus = 1;
  std::string memory = "512M";
  bool detach = false;
  bool remove = false;  // --rm: remove the box after the command
  ExecOptions exec;
};

int cmdRun(const ApiClient& client, const Output& out, const RunOptions& options);
int cmdExec(const ApiClient& client, const Output& out, const std::string& box,
            const ExecOptions& options);
int cmdList(const ApiClient& client, const Output& out);
int cmdInspect(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes);
int cmdLogs(const ApiClient& client, const Output& out, const std::string& box);
int cmdStop(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes);
int cmdRemove(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes,
              bool force);
int cmdDoctor(const ApiClient& client, const Output& out);

// "512", "512M", "512MiB", "2G", "2GiB" -> MiB.
Result<uint64_t> parseMemoryMib(const std::string& text);

}  // namespace hutch::cli

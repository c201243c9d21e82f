// hutch mcp: MCP's stdio transport for MCP clients (Claude Code, Codex...), relayed to hutchd's
// /mcp endpoint (cli/mcp_relay.h). stdout carries only MCP messages; logs go to stderr.
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli/commands/commands.h"
#include "cli/mcp_relay.h"

namespace hutch::cli {

int cmdMcp(const ApiClient& client) {
  std::signal(SIGPIPE, SIG_IGN);  // a client that closed stdout: writes fail, we end
  std::mutex out_mutex;
  auto write = [&out_mutex](const std::string& line) {
    std::lock_guard lock(out_mutex);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  };
  auto log = [](const std::string& text) { std::fprintf(stderr, "%s\n", text.c_str()); };
  McpRelay relay(
      [&client](const std::map<std::string, std::string>& headers, const std::string& body) {
        return client.exchange(boost::beast::http::verb::post, "/mcp", headers, body);
      },
      write, log);
  log("hutch mcp: serving MCP on stdio through " + client.endpoint().describe() + " /mcp");

  // After initialize, messages are relayed concurrently: a ping or another tool call need not
  // wait for a long run_command.
  std::mutex running_mutex;
  std::condition_variable idle;
  unsigned running = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!relay.initialized()) {
      relay.handleLine(line);
      continue;
    }
    {
      std::lock_guard lock(running_mutex);
      ++running;
    }
    std::thread([&relay, &running_mutex, &idle, &running, line] {
      relay.handleLine(line);
      std::lock_guard lock(running_mutex);
      if (--running == 0) idle.notify_all();
    }).detach();
  }
  {
    std::unique_lock lock(running_mutex);
    idle.wait(lock, [&running] { return running == 0; });
  }
  // stdin closed: the client is done with the session.
  if (auto headers = relay.sessionHeaders(); !headers.empty()) {
    (void)client.exchange(boost::beast::http::verb::delete_, "/mcp", headers, "");
  }
  return 0;
}

}  // namespace hutch::cli

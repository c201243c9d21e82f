// Test fixture piece: the real hutch-agent running with --listen on a socket in a fresh temp
// directory. Killed and reaped (and the directory removed) on destruction.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::agent::testing {

class AgentProcess {
 public:
  // Starts the agent (with extra_args after --listen SOCKET); does not wait for its socket
  // (connect() retries).
  static Result<std::unique_ptr<AgentProcess>> start(std::vector<std::string> extra_args = {});
  // A temp directory and socket path, without starting the agent yet (see launch()).
  static Result<std::unique_ptr<AgentProcess>> prepare();

  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  Result<> launch(std::vector<std::string> extra_args = {});

  const std::string& dir() const { return dir_; }
  const std::string& socketPath() const { return socket_path_; }
  pid_t pid() const { return pid_; }

  // A blocking connection to the agent's socket, retrying until it accepts or the timeout.
  Result<UniqueFd> connect(std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

  // Waits up to timeout for the agent to exit; its wait status, or kTimeout.
  Result<int> waitExit(std::chrono::milliseconds timeout);

  // SIGKILL and reap, as if the box died.
  void kill();

 private:
  AgentProcess() = default;

  std::string dir_;
  std::string socket_path_;
  pid_t pid_ = -1;
};

// True once pid no longer exists (or is a zombie of someone else), polling up to timeout.
bool waitForProcessGone(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace hutch::agent::testing

#include "agent/testing/agent_process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace hutch::agent::testing {

Result<std::unique_ptr<AgentProcess>> AgentProcess::prepare() {
  // Short, so the socket path fits in sun_path.
  char dir[] = "/tmp/hutch-agent-XXXXXX";
  if (!::mkdtemp(dir)) return fail(sysError("Cannot create a temp directory", errno));
  std::unique_ptr<AgentProcess> agent(new AgentProcess());
  agent->dir_ = dir;
  agent->socket_path_ = agent->dir_ + "/agent.sock";
  return agent;
}

Result<std::unique_ptr<AgentProcess>> AgentProcess::start(std::vector<std::string> extra_args) {
  HUTCH_TRY(auto agent, prepare());
  HUTCH_TRY_VOID(agent->launch(std::move(extra_args)));
  return agent;
}

Result<> AgentProcess::launch(std::vector<std::string> extra_args) {
  std::vector<std::string> args = {HUTCH_AGENT_PATH, "--listen", socket_path_};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return fail(sysError("Cannot fork", errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
    ::execv(HUTCH_AGENT_PATH, argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  return ok();
}

AgentProcess::~AgentProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    if (!waitExit(std::chrono::seconds(10))) kill();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void AgentProcess::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

Result<int> AgentProcess::waitExit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return fail(Errc::kFailedPrecondition, "The agent is not running");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return status;
    }
    if (r < 0 && errno != EINTR) return fail(sysError("waitpid", errno));
    if (std::chrono::steady_clock::now() >= deadline) {
      return fail(Errc::kTimeout, "The agent did not exit");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Result<UniqueFd> AgentProcess::connect(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof addr.sun_path - 1);
  while (true) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return fail(sysError("socket", errno));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    const int err = errno;
    if (err != ENOENT && err != ECONNREFUSED) return fail(sysError("connect", err));
    if (std::chrono::steady_clock::now() >= deadline) {
      return fail(Errc::kTimeout, "The agent's socket did not accept connections");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool waitForProcessGone(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    // A zombie still answers kill(0): check its state.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    std::getline(stat, text);
    const size_t paren = text.rfind(')');
    if (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z') {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace hutch::agent::testing

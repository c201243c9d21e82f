#include "agent/exec/detached_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <cerrno>
#include <string>

#include "agent/exec/spawn.h"
#include "base/unique_fd.h"
#include "proto/identity.h"

namespace hutch::agent {
namespace {

// mkdir -p with mode 0755.
Result<> makeDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return fail(sysError("Cannot create " + prefix, errno));
    }
    if (slash == std::string::npos) return ok();
  }
}

std::string randomId() {
  char bytes[4] = {};
  // Never blocks once the RNG is initialised; before that a weaker id is still unique enough
  // (the log file is created exclusively).
  if (::getrandom(bytes, sizeof bytes, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bytes)) {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    const auto mix = static_cast<uint32_t>(ts.tv_nsec) ^ static_cast<uint32_t>(::getpid() << 16);
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((mix >> (8 * i)) & 0xff);
  }
  return proto::encodeHex(std::string_view(bytes, sizeof bytes));
}

}  // namespace

int64_t realtimeNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Result<std::pair<proto::ProcessInfo, UniqueFd>> DetachedProcesses::newLog() {
  HUTCH_TRY_VOID(makeDirectories(log_dir_));
  proto::ProcessInfo info;
  UniqueFd log;
  for (int attempt = 0; attempt < 16 && !log; ++attempt) {
    info.id = randomId();
    info.log = log_dir_ + "/" + info.id + ".log";
    log = UniqueFd(
        ::open(info.log.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644));
    if (!log && errno != EEXIST) return fail(sysError("Cannot create " + info.log, errno));
  }
  if (!log) return fail(Errc::kInternal, "Cannot find an unused log file name in " + log_dir_);
  return std::make_pair(std::move(info), std::move(log));
}

Result<DetachedProcesses::Adopted> DetachedProcesses::adopt(pid_t pid,
                                                            const std::vector<std::string>& argv,
                                                            const std::string& user,
                                                            int64_t started_ns) {
  HUTCH_TRY(auto made, newLog());
  auto& [info, log] = made;
  info.pid = pid;
  info.argv = argv;
  info.user = user;
  info.started_ns = started_ns;
  processes_.push_back(info);
  return Adopted{std::move(info), std::move(log)};
}

Result<proto::ProcessInfo> DetachedProcesses::start(const SpawnSpec& spec,
                                                    const proto::ExecRequest& request) {
  HUTCH_TRY(auto made, newLog());
  auto& [info, log] = made;
  HUTCH_TRY(info.pid, spawnDetached(spec, log.get()));
  info.argv = request.argv;
  info.user = request.user;
  info.started_ns = realtimeNs();
  processes_.push_back(info);
  return info;
}

bool DetachedProcesses::onExited(pid_t pid, int wait_status) {
  for (auto& p : processes_) {
    if (p.pid != pid || !p.running()) continue;
    p.exit = WIFSIGNALED(wait_status) ? proto::ExitStatus::signaled(WTERMSIG(wait_status))
                                      : proto::ExitStatus::exited(WEXITSTATUS(wait_status));
    forgetOldEnded();
    return true;
  }
  return false;
}

void DetachedProcesses::forgetOldEnded() {
  size_t ended = 0;
  for (const auto& p : processes_) ended += p.running() ? 0 : 1;
  for (auto it = processes_.begin(); ended > kKeepEnded && it != processes_.end();) {
    if (it->running()) {
      ++it;
      continue;
    }
    it = processes_.erase(it);
    --ended;
  }
}

Result<> DetachedProcesses::signal(const proto::SignalProcess& request) {
  if (request.signal < 1 || request.signal > SIGRTMAX) {
    return fail(Errc::kInvalidArgument,
                "Signal " + std::to_string(request.signal) + " is not a signal number");
  }
  for (const auto& p : processes_) {
    if (p.id != request.id) continue;
    if (!p.running()) {
      return fail(Errc::kFailedPrecondition, "Process " + p.id + " has already ended");
    }
    // Its process group: what it started goes too (it is the leader of its own session).
    if (::kill(-p.pid, request.signal) != 0) {
      return fail(sysError("Cannot signal process " + p.id, errno));
    }
    return ok();
  }
  return fail(Errc::kNotFound, "No detached process has the id \"" + request.id + "\"");
}

}  // namespace hutch::agent

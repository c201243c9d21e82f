#include "sys/pidfd.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace hutch::sys {

namespace {
constexpr idtype_t kPidfdIdType = static_cast<idtype_t>(3);  // P_PIDFD, <linux/wait.h>
}

ExitStatus ExitStatus::fromWaitStatus(int wstatus) {
  if (WIFEXITED(wstatus)) return exited(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) return signaled(WTERMSIG(wstatus));
  return {};
}

std::string ExitStatus::describe() const {
  switch (kind) {
    case Kind::kExited: return "exited with status " + std::to_string(value);
    case Kind::kSignaled: {
      std::string text = "killed by signal " + std::to_string(value);
      if (const char* abbrev = ::sigabbrev_np(value)) text += std::string(" (SIG") + abbrev + ")";
      return text;
    }
    case Kind::kUnknown: break;
  }
  return "exited (status unknown: not a child of this process)";
}

Result<UniqueFd> pidfdOpen(pid_t pid) {
  long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) {
    int err = errno;
    std::string what = "Cannot open a pidfd for process " + std::to_string(pid);
    if (err == ESRCH) return fail(Errc::kNotFound, "Process " + std::to_string(pid) + " is gone");
    return fail(sysError(what, err));
  }
  return UniqueFd(static_cast<int>(fd));
}

Result<> pidfdSignal(int pidfd, int sig) {
  if (::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) != 0) {
    if (errno == ESRCH) return ok();
    return fail(sysError("Cannot send signal " + std::to_string(sig) + " through a pidfd", errno));
  }
  return ok();
}

Result<std::optional<ExitStatus>> pidfdTryReap(int pidfd) {
  siginfo_t info;
  ::memset(&info, 0, sizeof info);
  for (;;) {
    if (::waitid(kPidfdIdType, static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG) == 0) break;
    if (errno == EINTR) continue;
    if (errno == ECHILD) {
      return fail(Errc::kFailedPrecondition, "The process is not a child of this process", ECHILD);
    }
    return fail(sysError("Cannot wait for a process through its pidfd", errno));
  }
  if (info.si_pid == 0) return std::optional<ExitStatus>();
  if (info.si_code == CLD_EXITED) return std::optional(ExitStatus::exited(info.si_status));
  return std::optional(ExitStatus::signaled(info.si_status));
}

bool pidfdExited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  return n > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

}  // namespace hutch::sys

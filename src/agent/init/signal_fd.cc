#include "agent/init/signal_fd.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

namespace hutch::agent {

Result<UniqueFd> openSignalFd(std::initializer_list<int> signals) {
  sigset_t set;
  ::sigemptyset(&set);
  for (int sig : signals) ::sigaddset(&set, sig);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
    return fail(sysError("Cannot block signals", errno));
  }
  UniqueFd fd(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd) return fail(sysError("Cannot create a signalfd", errno));
  return fd;
}

int readSignal(int signal_fd) {
  signalfd_siginfo info{};
  while (true) {
    const ssize_t n = ::read(signal_fd, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}

}  // namespace hutch::agent

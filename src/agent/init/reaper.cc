#include "agent/init/reaper.h"

#include <sys/wait.h>

#include <cerrno>

namespace hutch::agent {

int reapChildren(const ChildExitedFn& on_exited) {
  int reaped = 0;
  while (true) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return reaped;  // 0: children left, none exited; -1/ECHILD: no children
    ++reaped;
    if (on_exited) on_exited(pid, status);
  }
}

}  // namespace hutch::agent

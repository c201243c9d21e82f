// Process file descriptors (Linux >= 5.3): a handle on a process that cannot be confused with a
// later process reusing its pid. Readable (POLLIN) once the process has exited.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::sys {

// How a process ended.
struct ExitStatus {
  enum class Kind { kExited, kSignaled, kUnknown };
  Kind kind = Kind::kUnknown;
  int value = 0;  // the exit status or the signal number

  static ExitStatus exited(int status) { return {Kind::kExited, status}; }
  static ExitStatus signaled(int sig) { return {Kind::kSignaled, sig}; }
  // From a waitpid() status word.
  static ExitStatus fromWaitStatus(int wstatus);

  // "exited with status 1", "killed by signal 9 (SIGKILL)", "exited (status unknown: ...)".
  std::string describe() const;
  bool operator==(const ExitStatus&) const = default;
};

// pidfd_open(2). ESRCH (no such process) maps to kNotFound.
Result<UniqueFd> pidfdOpen(pid_t pid);

// pidfd_send_signal(2). Signalling a process that already exited is not an error.
Result<> pidfdSignal(int pidfd, int sig);

// Non-blocking reap through waitid(P_PIDFD, WNOHANG): the status if the child has exited,
// nullopt if it still runs. A process that is not our child gives kFailedPrecondition (ECHILD).
Result<std::optional<ExitStatus>> pidfdTryReap(int pidfd);

// Whether the process behind `pidfd` has exited (poll for POLLIN, no reaping).
bool pidfdExited(int pidfd);

}  // namespace hutch::sys

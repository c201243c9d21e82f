// Starts one exec'd process: fork, then in the child setsid, stdio pipes, groups/gid/uid, chdir
// and execve. A failure in the child (bad cwd for that user, not executable) comes back over a
// close-on-exec pipe and is returned as an error; the failed child is reaped here.
#pragma once

#include <sys/types.h>

#include "agent/exec/spawn_spec.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::agent {

struct SpawnedProcess {
  pid_t pid = -1;      // also its process group and session id
  UniqueFd stdin_fd;   // write end, non-blocking; invalid unless spec.pipe_stdin
  UniqueFd stdout_fd;  // read ends, non-blocking
  UniqueFd stderr_fd;
};

// The child gets exactly fds 0-2; every other agent fd is close-on-exec. Signals are unblocked
// and reset to their defaults in the child.
Result<SpawnedProcess> spawnProcess(const SpawnSpec& spec);

}  // namespace hutch::agent

// Starts one exec'd process: fork, then in the child setsid, stdio pipes (or a pseudo-terminal),
// groups/gid/uid, chdir and execve. A failure in the child (bad cwd for that user, not
// executable) comes back over a close-on-exec pipe and is returned as an error; the failed child
// is reaped here.
//
// With spec.tty the agent opens a pty pair (initial size spec.rows x spec.cols, IUTF8 on); the
// child makes the slave its controlling terminal (setsid + TIOCSCTTY) and gets it as 0, 1 and 2.
// The agent keeps only the master, as three descriptors of the same open file: one to read the
// output from, one to write stdin to (if spec.pipe_stdin) and one for control (size, termios,
// foreground process group). Closing the last of them hangs the terminal up.
#pragma once

#include <sys/types.h>

#include "agent/exec/spawn_spec.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::agent {

struct SpawnedProcess {
  pid_t pid = -1;      // also its process group and session id
  UniqueFd stdin_fd;   // write end, non-blocking; invalid unless spec.pipe_stdin
  UniqueFd stdout_fd;  // read ends, non-blocking; with a tty stderr_fd is invalid
  UniqueFd stderr_fd;
  UniqueFd terminal_fd;  // the pty master for ioctls; valid only with spec.tty
};

// The child gets exactly fds 0-2; every other agent fd is close-on-exec. Signals are unblocked
// and reset to their defaults in the child.
Result<SpawnedProcess> spawnProcess(const SpawnSpec& spec);

// A process with stdin /dev/null and stdout and stderr on output_fd (spec.pipe_stdin and
// spec.tty must be false); returns its pid (also its process group and session).
Result<pid_t> spawnDetached(const SpawnSpec& spec, int output_fd);

}  // namespace hutch::agent

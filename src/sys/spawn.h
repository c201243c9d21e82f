// Starting a child process with exactly the file descriptors it should have.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::sys {

// Parent's `parent_fd` becomes the child's `child_fd`.
struct FdMapping {
  int parent_fd = -1;
  int child_fd = -1;
};

struct SpawnOptions {
  // argv[0] is the program: a path, or a name looked up in PATH.
  std::vector<std::string> argv;
  // nullopt: inherit this process's environment.
  std::optional<std::vector<std::string>> env;
  // The keep-list: the only descriptors the child gets. Child fds 0, 1 and 2 that are not listed
  // are /dev/null. Every other descriptor is closed at exec, whatever its CLOEXEC flag.
  std::vector<FdMapping> fds;
  // setsid(): own session and process group, so the child outlives our session and terminal.
  bool new_session = false;
  std::filesystem::path cwd;  // empty: inherit
  // CLONE_NEW* flags: the child starts in new namespaces, made by clone(2) instead of fork(2).
  // With CLONE_NEWPID the child is PID 1 of a new PID namespace and still our child under the
  // returned pid (the jail uses this so that QEMU, exec'd in place, is what we wait for).
  // Only namespace flags are accepted; 0 (the default) forks as before.
  unsigned long clone_flags = 0;
  // PR_SET_PDEATHSIG(SIGKILL): the child is killed when the thread that spawned it ends, which
  // for a caller that waits for the child (runCapture, runStdout) means when hutchd dies. A
  // tool hutchd runs for its own work then never outlives it (a skopeo left pulling into the
  // store a restarted hutchd cleans). Not with clone_flags (a new PID namespace's parent is
  // not visible to the check).
  bool die_with_parent = false;
};

// Forks (or clones, see clone_flags) and execs. Returns once exec succeeded; an exec failure
// (program missing, not executable) is reported as an error, and that child is already reaped.
// Signal mask and dispositions are reset to defaults in the child.
Result<pid_t> spawn(const SpawnOptions& options);

// The first executable `name` in PATH (or `name` itself when it contains a '/').
Result<std::filesystem::path> findExecutable(std::string_view name);

}  // namespace hutch::sys

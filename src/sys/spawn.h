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
};

// Forks and execs. Returns once exec succeeded; an exec failure (program missing, not
// executable) is reported as an error, and that child is already reaped.
// Signal mask and dispositions are reset to defaults in the child.
Result<pid_t> spawn(const SpawnOptions& options);

// The first executable `name` in PATH (or `name` itself when it contains a '/').
Result<std::filesystem::path> findExecutable(std::string_view name);

}  // namespace hutch::sys

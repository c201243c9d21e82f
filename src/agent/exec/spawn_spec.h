// SpawnSpec: everything needed to start one exec'd process, resolved before fork() so that the
// child only makes async-signal-safe system calls and most failures are reported with a clear
// message before any process exists.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "agent/exec/user_db.h"
#include "base/result.h"
#include "proto/messages.h"

namespace hutch::agent {

inline constexpr const char* kDefaultPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct SpawnSpec {
  std::string path;               // the executable execve() gets
  std::vector<std::string> argv;  // argv[0] as the caller gave it
  std::vector<std::string> env;   // KEY=VALUE, complete
  std::string cwd;                // absolute
  std::string user;               // for messages: the name or uid
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  bool pipe_stdin = false;
  bool tty = false;   // a pseudo-terminal as 0, 1 and 2 (see spawn.h)
  uint16_t rows = 0;  // its initial size; 0 leaves the kernel's default
  uint16_t cols = 0;
};

inline constexpr const char* kDefaultTerm = "xterm-256color";

// Resolves the user, the environment (the request's entries exactly, plus PATH, HOME and USER
// when absent, and TERM=xterm-256color for a tty), the working directory (default: the user's
// home if it is a directory, else /) and the executable (argv[0] as given if it contains '/',
// else the first regular, executable file of that name in the absolute entries of PATH). A
// login_shell request runs {"/bin/bash", "-l"}, or {"/bin/sh", "-l"} when there is no
// executable /bin/bash (see loginShell). Unknown users and commands are kNotFound.
Result<SpawnSpec> makeSpawnSpec(const proto::ExecRequest& request, const UserDb& users);

// The argv of a login shell: {"/bin/bash", "-l"} if bash is an executable file, else
// {"/bin/sh", "-l"}. bash_path is a parameter for tests.
std::vector<std::string> loginShell(const std::string& bash_path = "/bin/bash");

// The value of KEY in a list of KEY=VALUE entries (the first one), or nullptr.
const std::string* findEnv(const std::vector<std::string>& env, std::string_view key);

// Finds name in the ':'-separated search path; empty if absent.
std::string searchPath(std::string_view name, std::string_view search_path);

}  // namespace hutch::agent

// hutch-jail's whole job, in order: everything that needs root, then exec in place.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "jail/jail_spec.h"

namespace hutch::jail {

// Exit statuses of hutch-jail when it cannot run the program (the program's own otherwise).
inline constexpr int kExitJailFailed = 125;  // a jail step failed; the reason is on stderr
inline constexpr int kExitCannotExec = 126;  // the program exists but cannot be executed
inline constexpr int kExitNotFound = 127;    // the program does not exist in the jail

// Must run as root and as PID 1 of a new PID namespace (sys::spawn with CLONE_NEWPID, or
// `unshare --pid --fork`). In order: refuse a uid still in use; create, limit and join the
// cgroup; join or create the network namespace; new mount, IPC, UTS and cgroup namespaces; the
// root filesystem (jail_root.h); rlimits; close stray descriptors; drop to uid:gid with no
// capabilities and no_new_privs; the seccomp filter; execve(argv) with spec.env. Returns only on
// failure; `exec_failed` then says whether it was the exec itself (for the exit status).
Result<> enterJailAndExec(const JailSpec& spec, const std::vector<std::string>& argv,
                          bool* exec_failed);

}  // namespace hutch::jail

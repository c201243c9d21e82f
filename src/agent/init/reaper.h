// Reaping: the agent is PID 1 (or a child subreaper in --listen mode), so every orphan in the box
// becomes its child. On each SIGCHLD it collects every exited child; statuses of exec'd processes
// go to their streams, the rest are dropped.
#pragma once

#include <sys/types.h>

#include <functional>

namespace hutch::agent {

using ChildExitedFn = std::function<void(pid_t pid, int wait_status)>;

// waitpid(-1, WNOHANG) until nothing more has exited; returns how many were reaped.
int reapChildren(const ChildExitedFn& on_exited);

}  // namespace hutch::agent

// Signals reach the agent's loop through a signalfd: the signals are blocked (so PID 1, which
// the kernel shields from default-action signals, still receives them) and read as events.
#pragma once

#include <initializer_list>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::agent {

// Blocks the signals and returns a non-blocking signalfd that reports them.
Result<UniqueFd> openSignalFd(std::initializer_list<int> signals);

// Reads one pending signal number from the signalfd; 0 if none is pending.
int readSignal(int signal_fd);

}  // namespace hutch::agent

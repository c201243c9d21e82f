// Reading /proc for one process.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::sys {

// /proc/PID/cmdline split at NULs. kNotFound if the process is gone.
Result<std::vector<std::string>> readCmdline(pid_t pid);

// Splits a NUL-separated argument block (what /proc/PID/cmdline holds).
std::vector<std::string> splitCmdline(std::string_view block);

// The file descriptors open in this process, from /proc/self/fd.
Result<std::vector<int>> listOpenFds();

}  // namespace hutch::sys

// The kernel command line (/proc/cmdline), where the host passes boot-time settings such as
// hutch.hostname=NAME.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hutch::agent {

// The value of the last "key=value" parameter for key; double quotes around a value (or around
// the whole parameter) are removed. A bare "key" gives "".
std::optional<std::string> kernelParam(std::string_view cmdline, std::string_view key);

// Reads /proc/cmdline (empty if unreadable).
std::string readKernelCmdline(const char* path = "/proc/cmdline");

}  // namespace hutch::agent

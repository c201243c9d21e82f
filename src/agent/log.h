// The agent's log: one line per event on stderr (the kernel console when the agent is PID 1).
// Deliberately tiny: the agent is static and starts on the boot path.
#pragma once

#include <string_view>

namespace hutch::agent {

void logInfo(std::string_view message);
void logWarning(std::string_view message);
void logError(std::string_view message);

}  // namespace hutch::agent

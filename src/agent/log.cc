#include "agent/log.h"

#include <unistd.h>

#include <string>

namespace hutch::agent {
namespace {

void writeLine(std::string_view level, std::string_view message) {
  std::string line = "hutch-agent: ";
  line += level;
  line += message;
  line += '\n';
  // One write per line so concurrent writers to the console do not interleave within a line.
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void logInfo(std::string_view message) {
  writeLine("", message);
}
void logWarning(std::string_view message) {
  writeLine("warning: ", message);
}
void logError(std::string_view message) {
  writeLine("error: ", message);
}

}  // namespace hutch::agent

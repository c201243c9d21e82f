#include "agent/init/kernel_cmdline.h"

#include <fstream>
#include <sstream>

namespace hutch::agent {

std::optional<std::string> kernelParam(std::string_view cmdline, std::string_view key) {
  std::optional<std::string> value;
  size_t i = 0;
  while (i < cmdline.size()) {
    while (i < cmdline.size() && (cmdline[i] == ' ' || cmdline[i] == '\t' || cmdline[i] == '\n')) {
      ++i;
    }
    if (i >= cmdline.size()) break;
    // One parameter: up to unquoted whitespace, with the quotes removed (as the kernel does).
    std::string param;
    bool quoted = false;
    while (i < cmdline.size()) {
      const char c = cmdline[i];
      if (c == '"') {
        quoted = !quoted;
      } else if (!quoted && (c == ' ' || c == '\t' || c == '\n')) {
        break;
      } else {
        param += c;
      }
      ++i;
    }
    if (param.compare(0, key.size(), key) != 0) continue;
    if (param.size() == key.size()) {
      value = "";
    } else if (param[key.size()] == '=') {
      value = param.substr(key.size() + 1);
    }
  }
  return value;
}

std::string readKernelCmdline(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace hutch::agent

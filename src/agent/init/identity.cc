#include "agent/init/identity.h"

#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/init/kernel_cmdline.h"

namespace hutch::agent {

bool isValidHostname(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '-' || name[0] == '.') return false;
  for (char c : name) {
    const bool good = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.';
    if (!good) return false;
  }
  return true;
}

Result<> applyHostname(std::string_view cmdline) {
  auto name = kernelParam(cmdline, kHostnameParam);
  if (!name) return ok();
  if (!isValidHostname(*name)) {
    return fail(Errc::kInvalidArgument, "Hostname \"" + *name +
                                            "\" from the kernel command line "
                                            "is not a valid hostname");
  }
  if (::sethostname(name->data(), name->size()) != 0) {
    return fail(sysError("Cannot set the hostname to " + *name, errno));
  }
  return addHostsEntry("/etc/hosts", *name);
}

Result<> addHostsEntry(const std::string& hosts_path, std::string_view name) {
  std::ifstream in(hosts_path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string word;
    words >> word;  // the address
    if (word.empty() || word[0] == '#') continue;
    while (words >> word) {
      if (word == name) return ok();
    }
  }
  in.close();
  // sudo and many tools resolve the own hostname; without this they wait for DNS and warn.
  std::ofstream out(hosts_path, std::ios::app);
  out << "127.0.1.1\t" << name << "\n";
  out.close();
  if (!out) return fail(sysError("Cannot add the hostname to " + hosts_path, errno));
  return ok();
}

}  // namespace hutch::agent

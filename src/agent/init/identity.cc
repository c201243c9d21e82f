#include "agent/init/identity.h"

#include <unistd.h>

#include <cerrno>
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
  return ok();
}

}  // namespace hutch::agent

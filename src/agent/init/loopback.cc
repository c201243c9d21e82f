#include "agent/init/loopback.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/unique_fd.h"

namespace hutch::agent {

Result<> bringUpLoopback() {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) return fail(sysError("Cannot create a socket to configure lo", errno));
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) {
    return fail(sysError("Cannot read the flags of lo", errno));
  }
  if (ifr.ifr_flags & IFF_UP) return ok();
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) {
    return fail(sysError("Cannot bring lo up", errno));
  }
  return ok();
}

}  // namespace hutch::agent

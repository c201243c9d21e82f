#include "net/netns.h"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "sys/run.h"

namespace hutch::net {

namespace fs = std::filesystem;

fs::path netnsPath(const std::string& name) {
  return fs::path("/run/netns") / name;
}

Result<> inNetns(const fs::path& netns, const std::function<Result<>()>& fn) {
  UniqueFd ns(::open(netns.c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) {
    return fail(sysError("Cannot open the network namespace " + netns.string(), errno));
  }
  Result<> result = ok();
  std::thread worker([&] {
    if (::setns(ns.get(), CLONE_NEWNET) != 0) {
      result = fail(sysError("Cannot enter the network namespace " + netns.string(), errno));
      return;
    }
    result = fn();
  });
  worker.join();
  return result;
}

Result<UniqueFd> openTap(const fs::path& netns, const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) {
    return fail(Errc::kInvalidArgument, "\"" + name + "\" is not a valid interface name");
  }
  UniqueFd tap;
  HUTCH_TRY_VOID(inNetns(netns, [&]() -> Result<> {
    UniqueFd fd(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
    if (!fd) return fail(sysError("Cannot open /dev/net/tun", errno));
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    if (::ioctl(fd.get(), TUNSETIFF, &ifr) != 0) {
      return fail(
          sysError("Cannot attach to the tap device " + name + " in " + netns.string(), errno));
    }
    tap = std::move(fd);
    return ok();
  }));
  return tap;
}

Result<> createNetns(const std::string& name) {
  if (fs::exists(netnsPath(name))) {
    return fail(Errc::kAlreadyExists, "The network namespace " + name + " exists");
  }
  HUTCH_TRY_VOID(sys::runCapture({"ip", "netns", "add", name}));
  return ok();
}

Result<> deleteNetns(const std::string& name) {
  if (!fs::exists(netnsPath(name))) return ok();
  HUTCH_TRY_VOID(sys::runCapture({"ip", "netns", "delete", name}));
  return ok();
}

std::vector<std::string> listNetns(const std::string& prefix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/run/netns", ec)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with(prefix)) names.push_back(name);
  }
  return names;
}

}  // namespace hutch::net

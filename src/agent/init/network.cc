#include "agent/init/network.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "agent/init/identity.h"
#include "agent/init/kernel_cmdline.h"
#include "base/unique_fd.h"

namespace hutch::agent {

namespace {

Result<uint32_t> parseAddress(std::string_view text, std::string_view what) {
  in_addr addr{};
  std::string copy(text);
  if (::inet_pton(AF_INET, copy.c_str(), &addr) != 1) {
    return fail(Errc::kInvalidArgument,
                "hutch." + std::string(what) + "=" + copy + " is not an IPv4 address");
  }
  return ntohl(addr.s_addr);
}

sockaddr ipv4(uint32_t host_order) {
  sockaddr out{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&out);
  sin->sin_family = AF_INET;
  sin->sin_addr.s_addr = htonl(host_order);
  return out;
}

std::string dotted(uint32_t host_order) {
  in_addr addr{htonl(host_order)};
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr, buf, sizeof buf);
  return buf;
}

}  // namespace

Result<std::optional<NetConfig>> parseNetConfig(std::string_view cmdline) {
  auto ip = kernelParam(cmdline, "hutch.ip");
  if (!ip) return std::optional<NetConfig>{};
  NetConfig config;
  std::string_view cidr = *ip;
  size_t slash = cidr.find('/');
  HUTCH_TRY(config.address, parseAddress(cidr.substr(0, slash), "ip"));
  if (slash != std::string_view::npos) {
    std::string_view bits = cidr.substr(slash + 1);
    auto [ptr, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), config.prefix);
    if (ec != std::errc() || ptr != bits.data() + bits.size() || config.prefix < 1 ||
        config.prefix > 30) {
      return fail(Errc::kInvalidArgument,
                  "hutch.ip=" + *ip + " has a bad prefix length (1 to 30 bits)");
    }
  }
  auto gw = kernelParam(cmdline, "hutch.gw");
  if (!gw) return fail(Errc::kInvalidArgument, "hutch.ip is set but hutch.gw (the gateway) is not");
  HUTCH_TRY(config.gateway, parseAddress(*gw, "gw"));
  auto dns = kernelParam(cmdline, "hutch.dns");
  config.dns = config.gateway;
  if (dns) {
    HUTCH_TRY(config.dns, parseAddress(*dns, "dns"));
  }
  return std::optional<NetConfig>(config);
}

std::string resolvConf(const NetConfig& config) {
  return "# Written by hutch-agent at boot: hutch's resolver answers only names the box may "
         "reach.\nnameserver " +
         dotted(config.dns) + "\noptions timeout:2 attempts:2\n";
}

Result<> applyNetConfig(const NetConfig& config, const std::string& resolv_conf) {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) return fail(sysError("Cannot create a socket to configure the network", errno));
  const std::string& dev = config.device;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, dev.c_str(), IFNAMSIZ - 1);
  ifr.ifr_addr = ipv4(config.address);
  if (::ioctl(sock.get(), SIOCSIFADDR, &ifr) != 0) {
    return fail(sysError("Cannot give " + dev + " the address " + dotted(config.address), errno));
  }
  uint32_t mask = config.prefix == 0 ? 0 : ~uint32_t{0} << (32 - config.prefix);
  ifr.ifr_netmask = ipv4(mask);
  if (::ioctl(sock.get(), SIOCSIFNETMASK, &ifr) != 0) {
    return fail(sysError("Cannot set the netmask of " + dev, errno));
  }
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) {
    return fail(sysError("Cannot read the flags of " + dev, errno));
  }
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) {
    return fail(sysError("Cannot bring " + dev + " up", errno));
  }
  rtentry route{};
  route.rt_dst = ipv4(0);
  route.rt_genmask = ipv4(0);
  route.rt_gateway = ipv4(config.gateway);
  route.rt_flags = RTF_UP | RTF_GATEWAY;
  std::string dev_name = dev;
  route.rt_dev = dev_name.data();
  if (::ioctl(sock.get(), SIOCADDRT, &route) != 0 && errno != EEXIST) {
    return fail(sysError("Cannot add the default route via " + dotted(config.gateway), errno));
  }
  // Replaced, not written through: a symlink (systemd-resolved's stub) would send it elsewhere.
  HUTCH_TRY_VOID(updateFile(resolv_conf, resolvConf(config), 0644));
  return ok();
}

}  // namespace hutch::agent

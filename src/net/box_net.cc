#include "net/box_net.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "net/netns.h"
#include "sys/files.h"
#include "sys/run.h"

namespace hutch::net {

namespace fs = std::filesystem;

std::string boxRuleset() {
  // One table for IPv4 and IPv6. Everything from the box either goes to one of the three
  // sockets (DNS, explicit proxy, transparent listener) or is dropped; nothing is forwarded.
  return fmt::format(R"(table inet hutch {{
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    iifname "{tap}" meta nfproto ipv4 udp dport 53 redirect to :{dns}
    iifname "{tap}" meta nfproto ipv4 ip daddr {gw} tcp dport {proxy} accept
    iifname "{tap}" meta nfproto ipv4 meta l4proto tcp redirect to :{transparent}
  }}
  chain input {{
    type filter hook input priority filter; policy drop;
    iifname "lo" accept
    iifname "{tap}" ct state established,related accept
    iifname "{tap}" meta nfproto ipv4 tcp dport {{ {proxy}, {transparent} }} accept
    iifname "{tap}" meta nfproto ipv4 udp dport {dns} accept
    iifname "{tap}" icmp type echo-request ip daddr {gw} accept
    iifname "{tap}" meta nfproto ipv6 icmpv6 type {{ nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit }} accept
  }}
  chain forward {{
    type filter hook forward priority filter; policy drop;
  }}
  chain output {{
    type filter hook output priority filter; policy accept;
  }}
}}
)",
                     fmt::arg("tap", kTapName), fmt::arg("gw", kGateway), fmt::arg("dns", kDnsPort),
                     fmt::arg("proxy", kExplicitProxyPort),
                     fmt::arg("transparent", kTransparentPort));
}

std::string linkCommands() {
  return fmt::format(
      "link set lo up\n"
      "tuntap add dev {tap} mode tap vnet_hdr\n"
      "addr add {gw}/24 dev {tap}\n"
      "link set {tap} up\n",
      fmt::arg("tap", kTapName), fmt::arg("gw", kGateway));
}

Result<BoxNetworks> BoxNetworks::create(std::string prefix, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + dir.string() + ": " + ec.message());
  BoxNetworks networks;
  networks.prefix_ = std::move(prefix);
  // ip and nft read their input from files: the keep-list spawn gives children no stdin.
  networks.links_ = dir / "links.ip";
  networks.rules_ = dir / "rules.nft";
  HUTCH_TRY_VOID(sys::writeFileAtomic(networks.links_, linkCommands()));
  HUTCH_TRY_VOID(sys::writeFileAtomic(networks.rules_, boxRuleset()));
  return networks;
}

fs::path BoxNetworks::pathFor(uint32_t index) const {
  return netnsPath(nameFor(index));
}

namespace {

Result<UniqueFd> boundSocket(int type, const char* address, uint16_t port) {
  UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail(sysError("Cannot create a socket in the box network", errno));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  if (::inet_pton(AF_INET, address, &sin.sin_addr) != 1) {
    return fail(Errc::kInternal, fmt::format("Bad address {}", address));
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) {
    return fail(
        sysError(fmt::format("Cannot bind {}:{} in the box network", address, port), errno));
  }
  if (type == SOCK_STREAM && ::listen(fd.get(), 512) != 0) {
    return fail(sysError(fmt::format("Cannot listen on {}:{}", address, port), errno));
  }
  return fd;
}

}  // namespace

Result<fs::path> BoxNetworks::prepare(uint32_t index) const {
  std::string name = nameFor(index);
  std::string context = "Cannot make the network namespace " + name;
  if (auto gone = deleteNetns(name); !gone) return fail(gone.error().withContext(context));
  if (auto made = createNetns(name); !made) return fail(made.error().withContext(context));
  auto undo = [&](const Error& error) {
    (void)deleteNetns(name);
    return fail(error.withContext(context));
  };
  if (auto linked = sys::runCapture({"ip", "-n", name, "-batch", links_.string()}); !linked) {
    return undo(linked.error());
  }
  fs::path path = netnsPath(name);
  auto ruled = inNetns(path, [&]() -> Result<> {
    HUTCH_TRY_VOID(sys::runCapture({"nft", "-f", rules_.string()}));
    return ok();
  });
  if (!ruled) return undo(ruled.error());
  return path;
}

Result<> BoxNetworks::release(uint32_t index) const {
  return deleteNetns(nameFor(index));
}

Result<Listeners> BoxNetworks::listeners(uint32_t index) const {
  Listeners out;
  HUTCH_TRY_VOID(inNetns(pathFor(index), [&]() -> Result<> {
    HUTCH_TRY(out.explicit_proxy, boundSocket(SOCK_STREAM, kGateway, kExplicitProxyPort));
    HUTCH_TRY(out.transparent, boundSocket(SOCK_STREAM, "0.0.0.0", kTransparentPort));
    HUTCH_TRY(out.dns, boundSocket(SOCK_DGRAM, kGateway, kDnsPort));
    return ok();
  }));
  return out;
}

void BoxNetworks::removeOrphans(const std::vector<uint32_t>& keep) const {
  for (const std::string& name : listNetns(prefix_)) {
    std::string_view digits = std::string_view(name).substr(prefix_.size());
    uint32_t index = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && ptr == digits.data() + digits.size() &&
        std::find(keep.begin(), keep.end(), index) != keep.end()) {
      continue;
    }
    (void)deleteNetns(name);
  }
}

}  // namespace hutch::net

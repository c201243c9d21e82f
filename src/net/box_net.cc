#include "net/box_net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "egress/drop_log.h"
#include "net/netns.h"
#include "sys/files.h"
#include "sys/run.h"

namespace hutch::net {

namespace fs = std::filesystem;

std::string boxRuleset() {
  // Two tables. `hutch_tap` sees every frame the box sends, before any protocol stack: ARP,
  // IPv4 TCP (for the proxy) and IPv4 UDP 53 (for the resolver) pass; QEMU's RARP announcement
  // after a restore and the guest kernel's IPv6 link chatter (router and neighbour
  // solicitations, MLD reports) are dropped quietly; anything else is dropped and logged to
  // NFLOG group egress::kDropLogGroup, which hutch-egress reads into the box's policy log (the
  // kernel's limit only guards hutch-egress's CPU; hutch-egress limits the entries itself).
  // `hutch` (IPv4 and IPv6) sends what passed to one of the three sockets; nothing is forwarded.
  return fmt::format(
      R"(table netdev hutch_tap {{
  chain ingress {{
    type filter hook ingress device "{tap}" priority filter; policy accept;
    ether type arp accept
    meta protocol ip meta l4proto tcp accept
    meta protocol ip udp dport 53 accept
    ether type 0x8035 drop
    icmpv6 type {{ nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert, mld-listener-report, mld2-listener-report }} drop
    limit rate {log_rate}/second burst {log_burst} packets log group {group} snaplen {snaplen} prefix "hutch-drop"
    drop
  }}
}}
table inet hutch {{
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
      fmt::arg("proxy", kExplicitProxyPort), fmt::arg("transparent", kTransparentPort),
      fmt::arg("group", egress::kDropLogGroup), fmt::arg("snaplen", egress::kDropLogCopyBytes),
      fmt::arg("log_rate", 200), fmt::arg("log_burst", 1000));
}

std::string linkCommands() {
  return fmt::format(
      "link set lo up\n"
      "tuntap add dev {tap} mode tap vnet_hdr\n"
      "link set {tap} address {mac}\n"
      "addr add {gw}/24 dev {tap}\n"
      "link set {tap} up\n",
      fmt::arg("tap", kTapName), fmt::arg("gw", kGateway), fmt::arg("mac", kGatewayMac));
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

// One NFLOG configuration request (NFULNL_MSG_CONFIG for `group`, one attribute), acknowledged.
std::vector<uint8_t> nflogConfig(uint32_t seq, uint16_t attr_type, const void* attr,
                                 size_t attr_len) {
  size_t attr_total = NLA_HDRLEN + attr_len;
  size_t len = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg)) + NLA_ALIGN(attr_total);
  std::vector<uint8_t> buf(len, 0);
  nlmsghdr hdr{};
  hdr.nlmsg_len = static_cast<uint32_t>(len);
  hdr.nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
  hdr.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  hdr.nlmsg_seq = seq;
  std::memcpy(buf.data(), &hdr, sizeof hdr);
  nfgenmsg gen{};
  gen.nfgen_family = AF_UNSPEC;
  gen.version = NFNETLINK_V0;
  gen.res_id = htons(egress::kDropLogGroup);
  std::memcpy(buf.data() + NLMSG_HDRLEN, &gen, sizeof gen);
  nlattr a{};
  a.nla_len = static_cast<uint16_t>(attr_total);
  a.nla_type = attr_type;
  size_t at = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
  std::memcpy(buf.data() + at, &a, sizeof a);
  std::memcpy(buf.data() + at + NLA_HDRLEN, attr, attr_len);
  return buf;
}

// Sends a configuration request and waits for its acknowledgement (packets logged meanwhile
// are skipped). The errno the kernel answered with, 0 for success.
Result<int> nflogRequest(int fd, uint32_t seq, uint16_t attr_type, const void* attr,
                         size_t attr_len) {
  auto message = nflogConfig(seq, attr_type, attr, attr_len);
  if (::send(fd, message.data(), message.size(), 0) < 0) {
    return fail(sysError("Cannot configure NFLOG in the box network", errno));
  }
  std::vector<uint8_t> buf(16384);
  for (int reads = 0; reads < 64; ++reads) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0) break;
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR || errno == ENOBUFS) continue;
      return fail(sysError("Cannot read NFLOG's answer in the box network", errno));
    }
    size_t at = 0;
    while (at + sizeof(nlmsghdr) <= static_cast<size_t>(n)) {
      nlmsghdr hdr{};
      std::memcpy(&hdr, buf.data() + at, sizeof hdr);
      if (hdr.nlmsg_len < sizeof hdr || at + hdr.nlmsg_len > static_cast<size_t>(n)) break;
      if (hdr.nlmsg_type == NLMSG_ERROR && hdr.nlmsg_seq == seq &&
          hdr.nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) {
        int error = 0;
        std::memcpy(&error, buf.data() + at + NLMSG_HDRLEN, sizeof error);
        return -error;
      }
      at += NLMSG_ALIGN(hdr.nlmsg_len);
    }
  }
  return fail(Errc::kTimeout, "NFLOG did not answer a configuration request in the box network");
}

// A NETLINK_NETFILTER socket bound to NFLOG group kDropLogGroup, copying packet headers. Made
// in the namespace it serves. The group is taken while an earlier socket of it is open (an old
// hutch-egress still exiting after a hutchd restart): tried again for a second.
Result<UniqueFd> dropLogSocket() {
  for (int attempt = 0;; ++attempt) {
    UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER));
    if (!fd) return fail(sysError("Cannot create an NFLOG socket in the box network", errno));
    sockaddr_nl local{};
    local.nl_family = AF_NETLINK;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      return fail(sysError("Cannot bind an NFLOG socket in the box network", errno));
    }
    nfulnl_msg_config_cmd bind{NFULNL_CFG_CMD_BIND};
    HUTCH_TRY(int bound, nflogRequest(fd.get(), 1, NFULA_CFG_CMD, &bind, sizeof bind));
    // The kernel answers EPERM while another socket holds the group (EBUSY: this one, twice).
    if ((bound == EPERM || bound == EBUSY) && attempt < 20) {
      ::usleep(50000);
      continue;
    }
    if (bound != 0) {
      return fail(sysError(
          fmt::format("Cannot bind NFLOG group {} in the box network", egress::kDropLogGroup),
          bound));
    }
    nfulnl_msg_config_mode mode{};
    mode.copy_range = htonl(egress::kDropLogCopyBytes);
    mode.copy_mode = NFULNL_COPY_PACKET;
    HUTCH_TRY(int moded, nflogRequest(fd.get(), 2, NFULA_CFG_MODE, &mode, sizeof mode));
    if (moded != 0) return fail(sysError("Cannot set NFLOG's copy mode in the box network", moded));
    if (::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK) != 0) {
      return fail(sysError("Cannot make the NFLOG socket non-blocking", errno));
    }
    return fd;
  }
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
    // Without it the box's network works and its drops go unlogged: not worth failing for.
    if (auto drops = dropLogSocket(); drops) {
      out.drops = std::move(*drops);
    } else {
      out.drops_error = drops.error();
    }
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

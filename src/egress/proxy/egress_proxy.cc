#include "egress/proxy/egress_proxy.h"

#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>

#include "egress/proxy/cell.h"

namespace hutch::egress::proxy {

namespace {
constexpr int kIp6tSoOriginalDst = 80;  // linux/netfilter_ipv6/ip6_tables.h, not includable here
}

Result<tcp::endpoint> socketOriginalDestination(tcp::socket& accepted) {
  error_code ec;
  tcp::endpoint local = accepted.local_endpoint(ec);
  if (ec) return fail(Errc::kInternal, "getsockname on a redirected connection: " + ec.message());
  int fd = accepted.native_handle();
  bool v4 = local.address().is_v4() || local.address().to_v6().is_v4_mapped();
  if (v4) {
    sockaddr_in sin{};
    socklen_t len = sizeof sin;
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &sin, &len) != 0) {
      int err = errno;
      return fail(Errc::kNotFound, "no original destination (SO_ORIGINAL_DST)", err);
    }
    return tcp::endpoint(asio::ip::address_v4(ntohl(sin.sin_addr.s_addr)), ntohs(sin.sin_port));
  }
  sockaddr_in6 sin6{};
  socklen_t len = sizeof sin6;
  if (getsockopt(fd, SOL_IPV6, kIp6tSoOriginalDst, &sin6, &len) != 0) {
    int err = errno;
    return fail(Errc::kNotFound, "no original destination (IP6T_SO_ORIGINAL_DST)", err);
  }
  asio::ip::address_v6::bytes_type bytes;
  std::memcpy(bytes.data(), sin6.sin6_addr.s6_addr, bytes.size());
  return tcp::endpoint(asio::ip::address_v6(bytes), ntohs(sin6.sin6_port));
}

Result<std::unique_ptr<EgressProxy>> EgressProxy::create(asio::io_context& io,
                                                         ProxyOptions options) {
  auto env = std::make_shared<ProxyEnv>();
  HUTCH_TRY(env->upstream_tls, makeUpstreamTlsContext(options.upstream_ca));
  if (!options.original_destination) options.original_destination = &socketOriginalDestination;
  env->options = std::move(options);
  return std::unique_ptr<EgressProxy>(new EgressProxy(io, std::move(env)));
}

EgressProxy::EgressProxy(asio::io_context& io, std::shared_ptr<const ProxyEnv> env)
    : io_(io), env_(std::move(env)) {}

EgressProxy::~EgressProxy() {
  for (auto& [id, cell] : cells_) cell->close();
}

Result<> EgressProxy::configureBox(const std::string& id, BoxConfig config,
                                   std::optional<BoxSockets> sockets) {
  // Check everything before changing anything.
  HUTCH_TRY(CertAuthority checked, CertAuthority::load(config.ca));
  (void)checked;
  auto it = cells_.find(id);
  if (it == cells_.end()) {
    if (!sockets) {
      return fail(Errc::kInvalidArgument,
                  "Box " + id + " is new: send its three sockets with the box message");
    }
    auto cell = std::make_shared<Cell>(io_, id, env_);
    HUTCH_TRY_VOID(cell->configure(std::move(config)));
    HUTCH_TRY_VOID(cell->setSockets(std::move(*sockets)));
    cells_[id] = std::move(cell);
    return ok();
  }
  if (sockets) HUTCH_TRY_VOID(it->second->setSockets(std::move(*sockets)));
  return it->second->configure(std::move(config));
}

Result<> EgressProxy::setPolicy(const std::string& id, Policy policy) {
  auto it = cells_.find(id);
  if (it == cells_.end()) {
    return fail(Errc::kNotFound, "No box " + id + " in hutch-egress; send a box message first");
  }
  it->second->setPolicy(std::move(policy));
  return ok();
}

Result<> EgressProxy::removeBox(const std::string& id) {
  auto it = cells_.find(id);
  if (it == cells_.end()) return fail(Errc::kNotFound, "No box " + id + " in hutch-egress");
  it->second->close();
  cells_.erase(it);
  return ok();
}

std::optional<asio::ip::udp::endpoint> EgressProxy::dnsEndpoint(const std::string& id) const {
  auto it = cells_.find(id);
  if (it == cells_.end()) return std::nullopt;
  return it->second->dnsEndpoint();
}

}  // namespace hutch::egress::proxy

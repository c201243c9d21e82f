// The egress proxy of hutch-egress: one Cell per box, all on one io_context thread. hutchd's
// control messages (control_channel.h) become calls here; tests call it directly.
//
//   auto proxy = EgressProxy::create(io.get_executor(), ProxyOptions{...});
//   (*proxy)->configureBox("b1", BoxConfig{policy, secrets, ca}, BoxSockets{...});
//   (*proxy)->setPolicy("b1", new_policy);   // the next connection sees it
//   (*proxy)->removeBox("b1");               // closes its sockets and connections
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "egress/log_entry.h"
#include "egress/policy.h"
#include "egress/proxy/address_filter.h"
#include "egress/proxy/asio.h"
#include "egress/proxy/ca.h"
#include "egress/proxy/secrets.h"
#include "egress/proxy/upstream.h"

namespace hutch::egress::proxy {

class Cell;

using LogSink = std::function<void(const LogEntry&)>;
// The destination a transparently redirected connection was meant for.
using OriginalDestination = std::function<Result<tcp::endpoint>(tcp::socket& accepted)>;

// getsockopt(SO_ORIGINAL_DST) (IPv4) or IP6T_SO_ORIGINAL_DST (IPv6) on a socket accepted from a
// listener that nftables redirected to. kNotFound when the connection was not redirected.
Result<tcp::endpoint> socketOriginalDestination(tcp::socket& accepted);

struct ProxyOptions {
  std::optional<std::filesystem::path> upstream_ca;      // extra CAs trusted for upstreams (PEM)
  UpstreamResolver resolver;                             // default: the system resolver
  AddressFilter filter;                                  // default: strict
  OriginalDestination original_destination;              // default: socketOriginalDestination
  LogSink log;                                           // every LogEntry; may be empty
  std::function<int64_t()> now_ms;                       // default: the system clock
  std::chrono::milliseconds first_bytes_timeout{10000};  // request line, ClientHello, handshake
  std::chrono::milliseconds connect_timeout{10000};      // per upstream address
  std::chrono::milliseconds idle_timeout{120000};        // between requests on a kept-alive link
  std::chrono::milliseconds response_timeout{600000};    // request sent → response header
  // After a box's drops outrun its DropLimiter (drop_log.h): when the count is logged.
  std::chrono::milliseconds drop_summary_delay{10000};
  // Where the boxes' DNS resolvers send allowed questions (nameserversFrom(resolv.conf)).
  std::vector<asio::ip::udp::endpoint> dns_upstreams;
};

// What a box's "box" control message carries besides its sockets.
struct BoxConfig {
  Policy policy;
  std::vector<Secret> secrets;
  CaPair ca;
};

// The box's sockets, created by hutchd inside the box's network namespace: the explicit proxy
// TCP listener (10.0.2.2:3128), the transparent TCP listener (:15001), the DNS UDP socket
// (10.0.2.2:53), all three listening/bound already; and optionally the NFLOG netlink socket of
// the packets the namespace dropped (egress/drop_log.h), bound and configured already.
struct BoxSockets {
  UniqueFd explicit_proxy;
  UniqueFd transparent;
  UniqueFd dns;
  UniqueFd drops;  // may be empty: no drop log
};

class EgressProxy {
 public:
  // Loads the upstream trust store (and options.upstream_ca). Call before dropping privileges
  // when the CA file is readable by root only.
  static Result<std::unique_ptr<EgressProxy>> create(asio::io_context& io, ProxyOptions options);
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // A new box (sockets required) or new settings for a known one (sockets optional: when
  // given, they replace the old ones). The CA is checked; errors leave the box as it was.
  Result<> configureBox(const std::string& id, BoxConfig config, std::optional<BoxSockets> sockets);
  // A live policy change: the next connection (and the next plain-HTTP request) sees it.
  Result<> setPolicy(const std::string& id, Policy policy);
  // Closes the box's sockets and open connections. kNotFound for an unknown id.
  Result<> removeBox(const std::string& id);

  bool hasBox(const std::string& id) const { return cells_.count(id) != 0; }
  // The UDP endpoint a box's DNS resolver serves (tests), or nullopt.
  std::optional<asio::ip::udp::endpoint> dnsEndpoint(const std::string& id) const;

 private:
  EgressProxy(asio::io_context& io, std::shared_ptr<const struct ProxyEnv> env);
  asio::io_context& io_;
  std::shared_ptr<const struct ProxyEnv> env_;
  std::map<std::string, std::shared_ptr<Cell>> cells_;
};

}  // namespace hutch::egress::proxy

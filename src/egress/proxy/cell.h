// One box inside hutch-egress: its policy, secrets, CA and sockets, the accept loops and the
// connections they started. Internal to the proxy library.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "egress/dns.h"
#include "egress/drop_log.h"
#include "egress/proxy/egress_proxy.h"

namespace hutch::egress::proxy {

// Process-wide settings shared by every cell (immutable after start).
struct ProxyEnv {
  ProxyOptions options;
  std::shared_ptr<ssl::context> upstream_tls;
};

// The sockets of one live connection, closed by Cell::close().
struct LiveSockets {
  tcp::socket* box = nullptr;
  tcp::socket* upstream = nullptr;
  void close();
};

class Cell : public std::enable_shared_from_this<Cell> {
 public:
  Cell(asio::io_context& io, std::string id, std::shared_ptr<const ProxyEnv> env);
  ~Cell();
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  const std::string& id() const { return id_; }
  const ProxyEnv& env() const { return *env_; }
  const ProxyOptions& options() const { return env_->options; }
  asio::any_io_executor executor() const { return executor_; }

  // Checks the CA, then takes all three (a new CA empties the leaf cache).
  Result<> configure(BoxConfig config);
  void setPolicy(Policy policy) { policy_ = std::move(policy); }
  // Checks the descriptors (stream listeners, a datagram socket, IPv4/IPv6, and a
  // NETLINK_NETFILTER socket if any), starts accepting on the listeners, a DnsResolver (dns.h)
  // on the UDP socket and reading dropped packets from the netlink socket; the previous
  // sockets, if any, are closed.
  Result<> setSockets(BoxSockets sockets);
  bool hasSockets() const { return explicit_ != nullptr; }
  std::optional<asio::ip::udp::endpoint> dnsEndpoint() const;
  const Policy& policy() const { return policy_; }
  // Stops accepting and closes every open connection.
  void close();
  bool closed() const { return closed_; }

  // Used by connections.
  Decision decide(std::string_view host, uint16_t port) const;
  std::shared_ptr<const std::vector<Secret>> secrets() const { return secrets_; }
  // A TLS server context presenting a leaf for `host` signed by the box's CA (cached).
  Result<std::shared_ptr<ssl::context>> boxTlsFor(const std::string& host);
  // A LogEntry with box, time, proto, host, port filled.
  LogEntry newEntry(std::string proto, std::string host, uint16_t port) const;
  void log(const LogEntry& entry) const;
  // A packet the box's namespace dropped: an entry of its own while the DropLimiter allows,
  // else counted into a summary entry logged options().drop_summary_delay later.
  void logDrop(const DroppedPacket& packet);

  uint64_t track(LiveSockets* live);
  void untrack(uint64_t token);

 private:
  static constexpr size_t kMaxCachedLeaves = 512;
  int64_t nowMs() const;
  asio::awaitable<void> logDropSummaryLater();

  asio::io_context& io_;
  asio::any_io_executor executor_;
  std::string id_;
  std::shared_ptr<const ProxyEnv> env_;
  Policy policy_;
  std::shared_ptr<const std::vector<Secret>> secrets_ = std::make_shared<std::vector<Secret>>();
  std::optional<CertAuthority> ca_;
  std::map<std::string, std::shared_ptr<ssl::context>> leaves_;
  std::shared_ptr<tcp::acceptor> explicit_;
  std::shared_ptr<tcp::acceptor> transparent_;
  std::unique_ptr<DnsResolver> dns_;
  std::shared_ptr<asio::posix::stream_descriptor> drops_;
  DropLimiter drop_limiter_;
  bool drop_summary_pending_ = false;
  std::map<uint64_t, LiveSockets*> live_;
  uint64_t next_token_ = 1;
  bool closed_ = false;
};

// Registers a connection's sockets with its cell for the connection's lifetime.
class LiveGuard {
 public:
  LiveGuard(Cell& cell, LiveSockets* live) : cell_(cell), token_(cell.track(live)) {}
  ~LiveGuard() { cell_.untrack(token_); }
  LiveGuard(const LiveGuard&) = delete;
  LiveGuard& operator=(const LiveGuard&) = delete;

 private:
  Cell& cell_;
  uint64_t token_;
};

// The connection handlers (explicit_proxy.cc, transparent.cc).
asio::awaitable<void> serveExplicit(std::shared_ptr<Cell> cell, tcp::socket socket);
asio::awaitable<void> serveTransparent(std::shared_ptr<Cell> cell, tcp::socket socket);

}  // namespace hutch::egress::proxy

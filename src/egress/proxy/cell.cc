#include "egress/proxy/cell.h"

#include <linux/netlink.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <cerrno>
#include <cstring>

#include "egress/proxy/log.h"

namespace hutch::egress::proxy {

namespace {

int64_t systemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int intOption(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof value;
  if (getsockopt(fd, level, name, &value, &len) != 0) return -1;
  return value;
}

int family(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  return ss.ss_family;
}

Result<> checkSocket(const UniqueFd& fd, const char* what, int type, bool listening) {
  if (!fd)
    return fail(Errc::kInvalidArgument, std::string("The ") + what + " descriptor is missing");
  int got_type = intOption(fd.get(), SOL_SOCKET, SO_TYPE);
  int fam = family(fd.get());
  if (got_type != type || (fam != AF_INET && fam != AF_INET6)) {
    return fail(Errc::kInvalidArgument,
                std::string("The ") + what + " descriptor is not an IPv4/IPv6 " +
                    (type == SOCK_STREAM ? "TCP" : "UDP") +
                    " socket; send the three sockets in the README's order");
  }
  if (listening && intOption(fd.get(), SOL_SOCKET, SO_ACCEPTCONN) != 1) {
    return fail(Errc::kInvalidArgument,
                std::string("The ") + what + " socket is not listening; call listen() first");
  }
  return ok();
}

Result<> checkDropSocket(const UniqueFd& fd) {
  if (intOption(fd.get(), SOL_SOCKET, SO_DOMAIN) != AF_NETLINK ||
      intOption(fd.get(), SOL_SOCKET, SO_PROTOCOL) != NETLINK_NETFILTER) {
    return fail(Errc::kInvalidArgument,
                "The fourth descriptor is not a NETLINK_NETFILTER socket; send the NFLOG socket "
                "of dropped packets there, or only three descriptors");
  }
  return ok();
}

// Reads the box's dropped packets until the socket closes.
asio::awaitable<void> dropLoop(std::shared_ptr<Cell> cell,
                               std::shared_ptr<asio::posix::stream_descriptor> socket) {
  std::vector<uint8_t> buffer(65536);
  bool warned_overrun = false;
  for (;;) {
    error_code ec;
    co_await socket->async_wait(asio::posix::descriptor_base::wait_read,
                                asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !socket->is_open() || cell->closed()) co_return;
    for (;;) {
      ssize_t n = ::recv(socket->native_handle(), buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        if (errno == ENOBUFS) {  // the kernel dropped log messages: a flood; go on reading
          if (!warned_overrun) egressLog().warn("box={} dropped-packet log overrun", cell->id());
          warned_overrun = true;
          continue;
        }
        egressLog().warn("box={} reading dropped packets failed: {}", cell->id(),
                         std::strerror(errno));
        co_return;
      }
      if (n == 0) break;
      for (const DroppedPacket& packet :
           parseNflogDatagram(std::span<const uint8_t>(buffer.data(), static_cast<size_t>(n)))) {
        cell->logDrop(packet);
      }
    }
  }
}

Result<std::shared_ptr<tcp::acceptor>> adoptListener(const asio::any_io_executor& ex, UniqueFd fd) {
  auto protocol = family(fd.get()) == AF_INET6 ? tcp::v6() : tcp::v4();
  auto acceptor = std::make_shared<tcp::acceptor>(ex);
  error_code ec;
  acceptor->assign(protocol, fd.get(), ec);
  if (ec) return fail(Errc::kInternal, "Cannot use a listening socket: " + ec.message());
  fd.release();
  return acceptor;
}

void reportCrash(const std::string& box, const char* what, const std::exception_ptr& e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    egressLog().error("box={} {} connection failed: {}", box, what, x.what());
  } catch (...) {
    egressLog().error("box={} {} connection failed", box, what);
  }
}

asio::awaitable<void> acceptLoop(std::shared_ptr<Cell> cell,
                                 std::shared_ptr<tcp::acceptor> acceptor, bool transparent) {
  const char* what = transparent ? "transparent" : "explicit proxy";
  for (;;) {
    error_code ec;
    tcp::socket socket =
        co_await acceptor->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (!acceptor->is_open() || ec == asio::error::operation_aborted || cell->closed()) co_return;
      egressLog().warn("box={} accepting on the {} socket failed: {}", cell->id(), what,
                       ec.message());
      asio::steady_timer pause(cell->executor(), std::chrono::milliseconds(100));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    std::string box = cell->id();
    auto done = [box, what](const std::exception_ptr& e) { reportCrash(box, what, e); };
    if (transparent) {
      asio::co_spawn(cell->executor(), serveTransparent(cell, std::move(socket)), done);
    } else {
      asio::co_spawn(cell->executor(), serveExplicit(cell, std::move(socket)), done);
    }
  }
}

}  // namespace

void LiveSockets::close() {
  error_code ignored;
  if (box != nullptr) box->close(ignored);
  if (upstream != nullptr) upstream->close(ignored);
}

Cell::Cell(asio::io_context& io, std::string id, std::shared_ptr<const ProxyEnv> env)
    : io_(io), executor_(io.get_executor()), id_(std::move(id)), env_(std::move(env)) {}

Cell::~Cell() {
  close();
}

Result<> Cell::configure(BoxConfig config) {
  HUTCH_TRY(CertAuthority ca, CertAuthority::load(config.ca));
  ca_ = std::move(ca);
  leaves_.clear();
  policy_ = std::move(config.policy);
  secrets_ = std::make_shared<const std::vector<Secret>>(std::move(config.secrets));
  return ok();
}

Result<> Cell::setSockets(BoxSockets sockets) {
  HUTCH_TRY_VOID(checkSocket(sockets.explicit_proxy, "explicit proxy", SOCK_STREAM, true));
  HUTCH_TRY_VOID(checkSocket(sockets.transparent, "transparent", SOCK_STREAM, true));
  HUTCH_TRY_VOID(checkSocket(sockets.dns, "DNS", SOCK_DGRAM, false));
  if (sockets.drops) HUTCH_TRY_VOID(checkDropSocket(sockets.drops));
  HUTCH_TRY(auto explicit_proxy, adoptListener(executor_, std::move(sockets.explicit_proxy)));
  HUTCH_TRY(auto transparent, adoptListener(executor_, std::move(sockets.transparent)));
  // The resolver asks this cell for the policy at each question, and logs through it.
  std::weak_ptr<Cell> weak = weak_from_this();
  DnsResolver::PolicySource policy = [weak] {
    auto cell = weak.lock();
    return cell ? cell->policy() : Policy{};
  };
  DnsResolver::LogSink log = [weak](const LogEntry& entry) {
    if (auto cell = weak.lock()) cell->log(entry);
  };
  HUTCH_TRY(auto dns, DnsResolver::create(io_, std::move(sockets.dns), options().dns_upstreams,
                                          std::move(policy), id_, std::move(log)));
  std::shared_ptr<asio::posix::stream_descriptor> drops;
  if (sockets.drops) {
    drops = std::make_shared<asio::posix::stream_descriptor>(executor_);
    error_code ec;
    drops->assign(sockets.drops.get(), ec);
    if (ec) return fail(Errc::kInternal, "Cannot use the NFLOG socket: " + ec.message());
    sockets.drops.release();
  }
  error_code ignored;
  if (explicit_) explicit_->close(ignored);
  if (transparent_) transparent_->close(ignored);
  if (dns_) dns_->stop();
  if (drops_) drops_->close(ignored);
  explicit_ = std::move(explicit_proxy);
  transparent_ = std::move(transparent);
  dns_ = std::move(dns);
  drops_ = std::move(drops);
  closed_ = false;
  auto report = [box = id_](const std::exception_ptr& e) { reportCrash(box, "accept", e); };
  asio::co_spawn(executor_, acceptLoop(shared_from_this(), explicit_, false), report);
  asio::co_spawn(executor_, acceptLoop(shared_from_this(), transparent_, true), report);
  if (drops_) {
    auto dropped = [box = id_](const std::exception_ptr& e) { reportCrash(box, "drop log", e); };
    asio::co_spawn(executor_, dropLoop(shared_from_this(), drops_), dropped);
  }
  return ok();
}

void Cell::close() {
  closed_ = true;
  error_code ignored;
  if (explicit_) explicit_->close(ignored);
  if (transparent_) transparent_->close(ignored);
  if (dns_) dns_->stop();
  dns_.reset();
  if (drops_) drops_->close(ignored);
  auto live = live_;
  for (auto& [token, sockets] : live) sockets->close();
}

std::optional<asio::ip::udp::endpoint> Cell::dnsEndpoint() const {
  if (!dns_) return std::nullopt;
  return dns_->localEndpoint();
}

Decision Cell::decide(std::string_view host, uint16_t port) const {
  return egress::decide(policy_, host, port);
}

Result<std::shared_ptr<ssl::context>> Cell::boxTlsFor(const std::string& host) {
  if (auto it = leaves_.find(host); it != leaves_.end()) return it->second;
  if (!ca_) return fail(Errc::kFailedPrecondition, "The box has no CA");
  HUTCH_TRY(CaPair leaf, ca_->mintLeaf(host));
  HUTCH_TRY(auto ctx, makeBoxTlsContext(leaf.cert, leaf.key, ca_->certPem()));
  if (leaves_.size() >= kMaxCachedLeaves) leaves_.clear();
  leaves_[host] = ctx;
  return ctx;
}

int64_t Cell::nowMs() const {
  return options().now_ms ? options().now_ms() : systemNowMs();
}

LogEntry Cell::newEntry(std::string proto, std::string host, uint16_t port) const {
  LogEntry e;
  e.box = id_;
  e.time_ms = nowMs();
  e.proto = std::move(proto);
  e.host = std::move(host);
  e.port = port;
  return e;
}

void Cell::log(const LogEntry& entry) const {
  egressLog().info("box={} {} {} {}:{} via {} ({}) up={} down={}", entry.box,
                   entry.allowed ? "allow" : "deny", entry.proto, entry.host, entry.port,
                   entry.address.empty() ? "-" : entry.address, entry.reason, entry.bytes_up,
                   entry.bytes_down);
  if (options().log) options().log(entry);
}

void Cell::logDrop(const DroppedPacket& packet) {
  if (!drop_limiter_.admit(nowMs())) {
    if (!drop_summary_pending_) {
      drop_summary_pending_ = true;
      auto report = [box = id_](const std::exception_ptr& e) { reportCrash(box, "drop log", e); };
      asio::co_spawn(executor_, logDropSummaryLater(), report);
    }
    return;
  }
  LogEntry entry = newEntry(packet.proto, "", packet.port);
  describeDrop(packet, entry);
  log(entry);
}

asio::awaitable<void> Cell::logDropSummaryLater() {
  std::weak_ptr<Cell> weak = weak_from_this();
  asio::steady_timer timer(executor_, options().drop_summary_delay);
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  auto self = weak.lock();
  if (!self) co_return;
  drop_summary_pending_ = false;
  uint64_t count = drop_limiter_.takeSuppressed();
  if (count == 0) co_return;
  LogEntry entry = newEntry("ip", "", 0);
  entry.reason = drop_limiter_.summaryReason(count);
  log(entry);
}

uint64_t Cell::track(LiveSockets* live) {
  uint64_t token = next_token_++;
  live_[token] = live;
  return token;
}

void Cell::untrack(uint64_t token) {
  live_.erase(token);
}

}  // namespace hutch::egress::proxy

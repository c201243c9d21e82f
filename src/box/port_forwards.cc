#include "box/port_forwards.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <set>

namespace hutch::box {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr size_t kChunk = size_t{64} * 1024;  // one kData frame
constexpr auto kConnectTimeout = std::chrono::seconds(15);

// One accepted connection and the agent's stream it is relayed to.
struct Relay {
  explicit Relay(tcp::socket s) : socket(std::move(s)) {}
  tcp::socket socket;
  std::shared_ptr<guest::TcpStream> stream;
  bool aborted = false;
  int pumps = 0;  // relay directions still running

  // Ends both directions now: the host peer sees a reset, the box peer too.
  void abort() {
    if (aborted) return;
    aborted = true;
    boost::system::error_code ec;
    if (socket.is_open()) {
      socket.set_option(asio::socket_base::linger(true, 0), ec);
      socket.close(ec);
    }
    if (stream) stream->close();
  }
};

Result<tcp::endpoint> endpointOf(const PortForward& forward) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(forward.host_address, ec);
  if (ec) {
    return fail(Errc::kInvalidArgument,
                fmt::format("'{}' is not an IP address", forward.host_address));
  }
  return tcp::endpoint(address, forward.host_port);
}

// Binds and listens on the forward's host endpoint.
Result<tcp::acceptor> bindHost(const asio::any_io_executor& loop, const PortForward& forward) {
  HUTCH_TRY(tcp::endpoint endpoint, endpointOf(forward));
  tcp::acceptor acceptor(loop);
  boost::system::error_code ec;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && endpoint.address().is_v6()) acceptor.set_option(asio::ip::v6_only(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) return acceptor;
  std::string where = fmt::format("port {} on {}", forward.host_port, forward.host_address);
  if (ec == asio::error::address_in_use) {
    return fail(Errc::kAlreadyExists,
                fmt::format("Cannot publish {}: it is in use on the host; choose another host "
                            "port",
                            where));
  }
  if (ec == asio::error::access_denied) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Cannot publish {}: permission denied", where));
  }
  if (ec.value() == EADDRNOTAVAIL) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Cannot publish {}: the host has no such address", where));
  }
  return fail(Errc::kInternal, fmt::format("Cannot publish {}: {}", where, ec.message()));
}

}  // namespace

class PortForwards::Listener : public std::enable_shared_from_this<PortForwards::Listener> {
 public:
  Listener(tcp::acceptor acceptor, PortForward forward, BoxService& service)
      : acceptor_(std::move(acceptor)), forward_(std::move(forward)), service_(service) {}

  void start() { asio::co_spawn(acceptor_.get_executor(), acceptLoop(), asio::detached); }

  // Stops accepting and ends the connections, but for those parked across a suspend (they go
  // on once the box is resumed, or end when it is not: BoxService decides).
  void close() {
    if (!closed_) {
      closed_ = true;
      boost::system::error_code ec;
      acceptor_.close(ec);
    }
    // Copied: abort() ends pumps, which erase themselves.
    auto relays = relays_;
    for (const auto& relay : relays) {
      if (!relay->stream || !relay->stream->parked()) relay->abort();
    }
  }

  // Ends every connection, parked ones too.
  void abortAll() {
    close();
    auto relays = relays_;
    for (const auto& relay : relays) relay->abort();
  }

  const PortForward& forward() const { return forward_; }
  uint64_t connections() const { return relays_.size(); }
  uint64_t accepted() const { return accepted_; }

 private:
  asio::awaitable<void> acceptLoop() {
    auto self = shared_from_this();
    while (!closed_) {
      boost::system::error_code ec;
      tcp::socket socket =
          co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (closed_) break;
      if (ec) {
        // EMFILE and the like: back off briefly instead of spinning.
        spdlog::warn("box={} port {}: accept failed: {}", forward_.box_id, hostEndpoint(forward_),
                     ec.message());
        asio::steady_timer pause(acceptor_.get_executor(), std::chrono::milliseconds(100));
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      auto relay = std::make_shared<Relay>(std::move(socket));
      relays_.insert(relay);
      ++accepted_;
      asio::co_spawn(acceptor_.get_executor(), serve(relay), asio::detached);
    }
  }

  asio::awaitable<void> serve(std::shared_ptr<Relay> relay) {
    auto self = shared_from_this();
    // Whoever connects to a published port is not known to hutch: the box's owner acts.
    // Named, not a braced temporary inside co_await: GCC 12 destroys those twice.
    const observe::Actor actor{.key_id = "",
                               .key_name = fmt::format("port {}", hostEndpoint(forward_))};
    auto agent = co_await service_.agentFor(forward_.box_id, actor);
    if (!agent) {
      spdlog::debug("box={} port {}: {}", forward_.box_id, hostEndpoint(forward_),
                    agent.error().describe());
      finish(relay);
      co_return;
    }
    std::shared_ptr<BoxAgent> client = *agent;
    std::string address(kDefaultPortAddress);
    auto stream = co_await client->connect(forward_.box_port, address, kConnectTimeout);
    if (!stream) {
      // Nothing listens in the box (yet): the host client sees its connection reset, as it
      // would connecting to a closed port.
      spdlog::debug("box={} port {} -> {}: {}", forward_.box_id, hostEndpoint(forward_),
                    forward_.box_port, stream.error().describe());
      finish(relay);
      co_return;
    }
    relay->stream = *stream;
    if (relay->aborted) {
      finish(relay);
      co_return;
    }
    relay->pumps = 2;
    asio::co_spawn(acceptor_.get_executor(), toBox(relay), asio::detached);
    asio::co_spawn(acceptor_.get_executor(), toHost(relay), asio::detached);
  }

  // Host client -> box. Reads only after the previous chunk was taken under the agent's window,
  // so a box peer that does not read stops the host client.
  asio::awaitable<void> toBox(std::shared_ptr<Relay> relay) {
    auto self = shared_from_this();
    std::string buffer(kChunk, '\0');
    while (!relay->aborted) {
      boost::system::error_code ec;
      size_t n = co_await relay->socket.async_read_some(
          asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
      if (relay->aborted) break;
      if (ec == asio::error::eof) {
        (void)relay->stream->shutdownWrite();  // the box peer reads end-of-file
        break;
      }
      if (ec) {
        relay->abort();
        break;
      }
      auto written = co_await relay->stream->write(std::string_view(buffer.data(), n));
      if (!written) {
        relay->abort();
        break;
      }
    }
    co_await pumpDone(relay);
  }

  // Box -> host client. read() grants the agent window as data is taken, so a host client that
  // does not read stops the box peer.
  asio::awaitable<void> toHost(std::shared_ptr<Relay> relay) {
    auto self = shared_from_this();
    while (!relay->aborted) {
      auto bytes = co_await relay->stream->read();
      if (relay->aborted) break;
      if (!bytes) {
        relay->abort();  // reset inside the box, or the agent went away
        break;
      }
      boost::system::error_code ec;
      if (bytes->empty()) {
        relay->socket.shutdown(tcp::socket::shutdown_send, ec);
        break;
      }
      co_await asio::async_write(relay->socket, asio::buffer(*bytes),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        relay->abort();
        break;
      }
    }
    co_await pumpDone(relay);
  }

  asio::awaitable<void> pumpDone(std::shared_ptr<Relay> relay) {
    if (--relay->pumps > 0) co_return;
    // Both directions ended in order: let the agent finish writing into the box before the
    // stream is dropped (dropping an unfinished stream resets the box peer).
    if (!relay->aborted && relay->stream) (void)co_await relay->stream->done();
    finish(relay);
  }

  void finish(const std::shared_ptr<Relay>& relay) {
    boost::system::error_code ec;
    if (relay->stream && !relay->stream->ended()) {
      relay->abort();
    } else if (relay->socket.is_open()) {
      if (!relay->stream) relay->socket.set_option(asio::socket_base::linger(true, 0), ec);
      relay->socket.close(ec);
    }
    relays_.erase(relay);
  }

  tcp::acceptor acceptor_;
  PortForward forward_;
  BoxService& service_;
  bool closed_ = false;
  std::set<std::shared_ptr<Relay>> relays_;
  uint64_t accepted_ = 0;
};

PortForwards::PortForwards(asio::any_io_executor loop, storage::BoxStore& store,
                           BoxService& service)
    : loop_(std::move(loop)), store_(store), service_(service) {}

PortForwards::~PortForwards() {
  closeAll();
}

PortStatus PortForwards::statusOf(const PortForward& forward) const {
  PortStatus status;
  status.forward = forward;
  if (auto it = listeners_.find(keyOf(forward));
      it != listeners_.end() && it->second->forward().box_id == forward.box_id) {
    status.listening = true;
    status.connections = it->second->connections();
    status.accepted = it->second->accepted();
  }
  // Connections kept across a suspend belong to the listener from before it.
  for (auto [it, end] = retired_.equal_range(forward.box_id); it != end; ++it) {
    if (keyOf(it->second->forward()) == keyOf(forward)) {
      status.connections += it->second->connections();
    }
  }
  if (auto it = errors_.find(keyOf(forward)); it != errors_.end()) status.error = it->second;
  return status;
}

Result<PortStatus> PortForwards::add(const std::string& box_key, PortForward forward) {
  HUTCH_TRY(Box box, store_.find(box_key));
  forward.box_id = box.id;
  forward.created_at = unixNow();
  HUTCH_TRY_VOID(validatePortForward(forward));
  // Another box's forward (maybe of a stopped box, with no listener) holds it: say which.
  HUTCH_TRY(std::vector<PortForward> all, store_.allPorts());
  for (const PortForward& other : all) {
    if (!sameHostPort(other, forward)) continue;
    if (other.box_id == box.id && other.host_address == forward.host_address) {
      return fail(
          Errc::kAlreadyExists,
          fmt::format("Box {} already publishes {} (to box port {}); remove it first "
                      "with 'hutch port rm {} {}'",
                      box.name, hostEndpoint(other), other.box_port, box.name, other.host_port));
    }
    auto owner = store_.find(other.box_id);
    return fail(Errc::kAlreadyExists,
                fmt::format("Cannot publish port {} on {}: box {} publishes it (as {}); choose "
                            "another host port",
                            forward.host_port, forward.host_address,
                            owner ? owner->name : other.box_id, hostEndpoint(other)));
  }
  // Bound first: a port in use is an error now, and then nothing is recorded.
  HUTCH_TRY(tcp::acceptor acceptor, bindHost(loop_, forward));
  HUTCH_TRY_VOID(store_.insertPort(forward));
  if (listensFor(box)) {
    auto listener = std::make_shared<Listener>(std::move(acceptor), forward, service_);
    listeners_[keyOf(forward)] = listener;
    errors_.erase(keyOf(forward));
    listener->start();
  }
  spdlog::info("box={} publishes {} -> box port {}", box.id, hostEndpoint(forward),
               forward.box_port);
  report("port.published", box, forward);
  return statusOf(forward);
}

Result<std::vector<PortStatus>> PortForwards::list(const std::string& box_key) {
  HUTCH_TRY(Box box, store_.find(box_key));
  HUTCH_TRY(std::vector<PortForward> forwards, store_.ports(box.id));
  std::vector<PortStatus> out;
  out.reserve(forwards.size());
  for (const PortForward& f : forwards) out.push_back(statusOf(f));
  return out;
}

Result<> PortForwards::remove(const std::string& box_key, uint16_t host_port,
                              const std::string& address) {
  HUTCH_TRY(Box box, store_.find(box_key));
  std::string normalized = address;
  if (!normalized.empty()) {
    PortForward probe{.host_address = address, .host_port = host_port, .box_port = 1};
    HUTCH_TRY_VOID(validatePortForward(probe));
    normalized = probe.host_address;
  }
  HUTCH_TRY(std::vector<PortForward> forwards, store_.ports(box.id));
  HUTCH_TRY_VOID(store_.removePort(box.id, host_port, normalized));
  for (const PortForward& f : forwards) {
    if (f.host_port != host_port || (!normalized.empty() && f.host_address != normalized)) {
      continue;
    }
    if (auto it = listeners_.find(keyOf(f));
        it != listeners_.end() && it->second->forward().box_id == box.id) {
      it->second->close();
      listeners_.erase(it);
    }
    errors_.erase(keyOf(f));
    spdlog::info("box={} no longer publishes {}", box.id, hostEndpoint(f));
    report("port.unpublished", box, f);
  }
  return ok();
}

void PortForwards::openFor(const std::string& box_id) {
  auto forwards = store_.ports(box_id);
  if (!forwards) {
    spdlog::warn("box={} cannot read its published ports: {}", box_id, forwards.error().describe());
    return;
  }
  for (const PortForward& f : *forwards) {
    if (auto it = listeners_.find(keyOf(f)); it != listeners_.end()) {
      if (it->second->forward().box_id == box_id) continue;  // already open
    }
    auto acceptor = bindHost(loop_, f);
    if (!acceptor) {
      // The box runs regardless; `hutch port ls` shows why this one is not listening.
      spdlog::warn("box={} {}", box_id, acceptor.error().describe());
      errors_[keyOf(f)] = acceptor.error().message();
      continue;
    }
    errors_.erase(keyOf(f));
    auto listener = std::make_shared<Listener>(std::move(*acceptor), f, service_);
    listeners_[keyOf(f)] = listener;
    listener->start();
    spdlog::info("box={} listening on {} -> box port {}", box_id, hostEndpoint(f), f.box_port);
  }
}

void PortForwards::closeFor(const std::string& box_id) {
  std::erase_if(retired_, [](const auto& entry) { return entry.second->connections() == 0; });
  for (auto it = listeners_.begin(); it != listeners_.end();) {
    if (it->second->forward().box_id == box_id) {
      it->second->close();
      // Connections parked across a suspend outlive their listener.
      if (it->second->connections() > 0) retired_.emplace(box_id, it->second);
      errors_.erase(it->first);
      it = listeners_.erase(it);
    } else {
      ++it;
    }
  }
  auto forwards = store_.ports(box_id);
  if (forwards) {
    for (const PortForward& f : *forwards) errors_.erase(keyOf(f));
  }
}

void PortForwards::openRunning() {
  auto boxes = store_.list();
  if (!boxes) return;
  for (const Box& b : *boxes) {
    if (listensFor(b)) openFor(b.id);
  }
}

void PortForwards::closeAll() {
  for (auto& [key, listener] : listeners_) listener->abortAll();
  for (auto& [box_id, listener] : retired_) listener->abortAll();
  listeners_.clear();
  retired_.clear();
  errors_.clear();
}

void PortForwards::report(const char* type, const Box& box, const PortForward& f) const {
  if (auto* events = service_.activity().events) {
    events->publish(
        type, observe::subjectOf(box),
        {{"host_port", f.host_port}, {"box_port", f.box_port}, {"address", f.host_address}});
  }
}

bool PortForwards::listensFor(const Box& box) const {
  // A paused box, or one suspended for being idle, is woken by a connection (agentFor).
  return box.state == BoxState::kRunning || box.state == BoxState::kPaused ||
         (box.state == BoxState::kSuspended && service_.suspendedBy(box.id) == "idle");
}

void PortForwards::boxStateChanged(const Box& box) {
  if (listensFor(box)) {
    openFor(box.id);
  } else if (box.state != BoxState::kCreating && box.state != BoxState::kStopping) {
    // Passing through creating or stopping changes nothing: a connection that is waking the box
    // (an idle one being resumed) must not be cut, nor one of a box being suspended for idleness.
    closeFor(box.id);
  }
}

size_t PortForwards::openConnections(const std::string& box_id) const {
  size_t open = 0;
  for (const auto& [key, listener] : listeners_) {
    if (listener->forward().box_id == box_id) open += listener->connections();
  }
  for (auto [it, end] = retired_.equal_range(box_id); it != end; ++it) {
    open += it->second->connections();
  }
  return open;
}

void PortForwards::boxRemoved(const std::string& box_id) {
  closeFor(box_id);
  for (auto [it, end] = retired_.equal_range(box_id); it != end; ++it) it->second->abortAll();
  retired_.erase(box_id);
  if (auto removed = store_.removePorts(box_id); !removed) {
    spdlog::warn("box={} cannot delete its published ports: {}", box_id,
                 removed.error().describe());
  }
}

}  // namespace hutch::box

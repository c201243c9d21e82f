// The transparent listener (:15001): every other TCP connection of the box, redirected by
// nftables. The original destination gives the port; the name comes from the SNI or Host.
#include <algorithm>

#include "egress/proxy/connection.h"

namespace hutch::egress::proxy {

namespace {

asio::ip::address unmapped(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}

}  // namespace

asio::awaitable<void> serveTransparent(std::shared_ptr<Cell> cell, tcp::socket socket) {
  auto original = cell->options().original_destination(socket);
  BoxStream box(std::move(socket));
  LiveSockets live;
  live.box = &box.next_layer().socket();
  LiveGuard guard(*cell, &live);
  if (!original) {
    LogEntry entry = cell->newEntry("tcp", "", 0);
    entry.reason = original.error().describe();
    cell->log(entry);
    co_return;
  }
  uint16_t port = original->port();
  std::string address = unmapped(original->address()).to_string();
  FirstBytes first = co_await readFirstBytes(box, cell->options().first_bytes_timeout);
  if (first.kind == FirstBytes::kOther) {
    LogEntry entry = cell->newEntry("tcp", "", port);
    entry.address = address;
    entry.reason = "no name to decide on: " + first.why;
    cell->log(entry);
    co_return;
  }
  if (first.kind == FirstBytes::kHttp) {
    PlainHttpMode mode;
    mode.original_port = port;
    mode.original_address = address;
    beast::flat_buffer buffer;
    co_await forwardPlainHttp(cell, box, buffer, live, std::move(mode));
    co_return;
  }
  LogEntry entry = cell->newEntry("https", first.sni, port);
  entry.address = address;
  Decision decision = cell->decide(first.sni, port);
  entry.allowed = decision.allowed;
  entry.reason = decision.reason;
  if (!decision.allowed) {
    cell->log(entry);
    co_return;
  }
  auto secrets = cell->secrets();
  bool bound = std::any_of(secrets->begin(), secrets->end(),
                           [&](const Secret& s) { return bindsHost(s, first.sni); });
  if (!bound) {
    co_await tunnelTo(cell, box, live, std::move(entry), first.sni, port, false);
    co_return;
  }
  // Secrets go only where the box really meant to connect: the address it dialled must be one
  // the name resolves to.
  auto resolved = co_await cell->options().resolver.resolve(first.sni);
  if (!resolved) {
    entry.reason = resolved.error().message();
    cell->log(entry);
    co_return;
  }
  asio::ip::address dialled = unmapped(original->address());
  bool agrees = std::any_of(resolved->begin(), resolved->end(),
                            [&](const asio::ip::address& a) { return unmapped(a) == dialled; });
  if (!agrees) {
    entry.allowed = false;
    entry.reason = "the box dialled " + address + ", which is not an address of " + first.sni;
    cell->log(entry);
    co_return;
  }
  co_await intercept(cell, box, live, std::move(entry), first.sni, port);
}

}  // namespace hutch::egress::proxy

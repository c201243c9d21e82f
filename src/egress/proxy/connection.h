// The pieces the explicit proxy and the transparent listener share. Internal to the library.
#pragma once

#include <memory>
#include <string>

#include "egress/proxy/box_stream.h"
#include "egress/proxy/cell.h"
#include "egress/proxy/request_target.h"

namespace hutch::egress::proxy {

// What the box sent first.
struct FirstBytes {
  enum Kind { kTls, kHttp, kOther } kind = kOther;
  std::string sni;  // kTls: the ClientHello's server name, canonicalName()
  std::string why;  // kOther: what was wrong ("TLS without a server name", "timeout"...)
};

// Reads until the first bytes are recognised (a whole ClientHello, or an HTTP request line's
// method), then gives them back to `box` (unread) so the next reader sees them.
asio::awaitable<FirstBytes> readFirstBytes(BoxStream& box, std::chrono::milliseconds timeout);

// Plain HTTP from the box, request by request: each request is decided on by its host (the
// absolute URI's in explicit mode, the Host header's in transparent mode), forwarded without
// secrets, and answered with the upstream's response. An upstream connection is kept while
// requests go to the same host and port; one LogEntry per upstream connection.
struct PlainHttpMode {
  bool explicit_proxy = false;
  uint16_t original_port = 0;    // transparent: the port the box connected to
  std::string original_address;  // transparent: the address the box connected to
  // Explicit mode: the first request, header already read.
  std::unique_ptr<http::request_parser<http::buffer_body>> first;
};
asio::awaitable<void> forwardPlainHttp(std::shared_ptr<Cell> cell, BoxStream& box,
                                       beast::flat_buffer& buffer, LiveSockets& live,
                                       PlainHttpMode mode);

// TLS interception for a host bound by secrets: TLS with the box using a leaf for `sni`, then
// HTTP/1.1 requests checked (Host = sni), given the secrets and forwarded over verified TLS to
// sni:port. `entry` is the connection's (allowed) LogEntry, logged at the end.
asio::awaitable<void> intercept(std::shared_ptr<Cell> cell, BoxStream& box, LiveSockets& live,
                                LogEntry entry, std::string sni, uint16_t port);

// Connects to host:port and splices bytes both ways with the box (whatever the box already sent
// is in its stream). `reply` is written to the box once connected (the CONNECT "200"), or a
// 502/403 answer in explicit mode when connecting fails. Logs `entry` at the end.
asio::awaitable<void> tunnelTo(std::shared_ptr<Cell> cell, BoxStream& box, LiveSockets& live,
                               LogEntry entry, std::string host, uint16_t port, bool connect_reply);

// The text a denied box connection is answered with.
std::string deniedText(const std::string& host, uint16_t port, const std::string& reason);

}  // namespace hutch::egress::proxy

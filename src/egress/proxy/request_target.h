// Names and request targets a box sends the proxy: the Host header, CONNECT's authority, an
// absolute URI. Pure functions over untrusted text (fuzzed: fuzz/http_relay_fuzz.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace hutch::egress::proxy {

// "host" from "host:port" or "host"; lower case, no trailing dot.
std::string normaliseHost(std::string_view host_port);
// A name in lower case without a trailing dot (names compare without case, RFC 4343).
std::string canonicalName(std::string_view name);
// Whether the Host header value (with or without a port) names `sni`.
bool hostMatches(std::string_view host_header, std::string_view sni);

struct HostPort {
  std::string host;  // normaliseHost()
  uint16_t port = 0;
  bool operator==(const HostPort&) const = default;
};
// "host:port" (CONNECT's authority form); the port is required.
std::optional<HostPort> parseAuthority(std::string_view text);

struct AbsoluteUri {
  std::string host;  // normaliseHost()
  uint16_t port = 80;
  std::string authority;  // as sent: what goes upstream as Host
  std::string path;       // "/..." with the query, without a fragment
  bool operator==(const AbsoluteUri&) const = default;
};
// "http://host[:port]/path?query" → parts; else the text that says what is wrong.
std::variant<AbsoluteUri, std::string> parseAbsoluteUri(std::string_view target);

}  // namespace hutch::egress::proxy

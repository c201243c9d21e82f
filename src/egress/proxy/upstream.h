// Upstream side: resolving names (with test overrides), refusing addresses (AddressFilter),
// connecting with a deadline, and the TLS client context that verifies upstream certificates.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "egress/proxy/address_filter.h"
#include "egress/proxy/asio.h"

namespace hutch::egress::proxy {

class UpstreamResolver {
 public:
  using Overrides = std::map<std::string, std::vector<asio::ip::address>>;
  // The system resolver (getaddrinfo: /etc/hosts, /etc/resolv.conf).
  UpstreamResolver() = default;
  // Names in `overrides` (lower case) resolve to their addresses without asking the system;
  // tests map "api.example.test" to 127.0.0.1 this way.
  explicit UpstreamResolver(Overrides overrides) : overrides_(std::move(overrides)) {}

  // The addresses of `host`, deduplicated, in the resolver's order. kUnavailable when the name
  // does not resolve.
  asio::awaitable<Result<std::vector<asio::ip::address>>> resolve(std::string host) const;

 private:
  Overrides overrides_;
};

// What connectUpstream() reached.
struct Upstream {
  beast::tcp_stream stream;
  tcp::endpoint endpoint;
};

// Resolves `host`, drops the addresses `filter` refuses (with the box policy's
// `allow_private`) and connects to the first of the others that answers within `timeout`.
// Errors: kFailedPrecondition when every address was refused (the message gives the addresses
// and why), kUnavailable when the name did not resolve or nothing answered. `resolver` and
// `filter` must outlive the coroutine; the rest is copied.
asio::awaitable<Result<Upstream>> connectUpstream(const UpstreamResolver& resolver,
                                                  const AddressFilter& filter, std::string host,
                                                  uint16_t port, std::chrono::milliseconds timeout,
                                                  std::vector<IpNetwork> allow_private);

// The TLS client context for upstreams: TLS 1.2+, peer verification against the system trust
// store plus `extra_ca` (a PEM file) when given, ALPN http/1.1.
Result<std::shared_ptr<ssl::context>> makeUpstreamTlsContext(
    const std::optional<std::filesystem::path>& extra_ca);

// The server context for the box's side of an intercepted connection: the leaf certificate and
// key (PEM), TLS 1.2+, ALPN http/1.1 only.
Result<std::shared_ptr<ssl::context>> makeBoxTlsContext(const std::string& cert_pem,
                                                        const std::string& key_pem,
                                                        const std::string& ca_pem);

}  // namespace hutch::egress::proxy

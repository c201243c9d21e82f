// Egress policy: which names and ports a box may reach through hutch's proxy and resolver.
// A plain value, parsed from JSON, decided on without I/O. Deny rules win over allow rules.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "egress/ip_ranges.h"

namespace hutch::egress {

// One rule. domain: "api.example.com" (exactly that name), "*.example.com" (any name below
// example.com, not example.com itself) or "*" (any name). Names compare case-insensitively and
// without a trailing dot. ports: empty = every port.
struct Rule {
  std::string domain;
  std::vector<uint16_t> ports;
  bool operator==(const Rule&) const = default;
};

struct Policy {
  std::vector<Rule> allow;
  std::vector<Rule> deny;
  // Private networks (inside 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 or
  // fc00::/7) the proxy may connect to when an allowed name resolves there: a LAN mirror.
  // Loopback, link-local, metadata and this host's own addresses stay refused (ip_ranges.h).
  std::vector<IpNetwork> allow_private;
  bool operator==(const Policy&) const = default;
};

// The JSON form (docs/network.md):
//   {"allow": [{"domain": "api.example.com", "ports": [443]}, {"domain": "*.debian.org"}],
//    "deny":  [{"domain": "evil.example.com"}],
//    "presets": ["debian-mirrors"],
//    "allow_private": ["192.168.1.0/24"]}
// "presets" adds the preset's rules (below) at parse time; the parsed Policy holds only rules.
// "allow_private" entries must lie inside a private range (Policy::allow_private).
// Unknown keys, bad domains ("", "a..b", "*x.com", IP literals), ports outside 1..65535 are
// errors (kInvalidArgument) whose message names the offending field and what is accepted.
Result<Policy> parsePolicy(const nlohmann::json& doc,
                           const std::filesystem::path& etc_apt = "/etc/apt");
// {"allow": [...], "deny": [...]}, and "allow_private": [...] when it has any.
nlohmann::json toJson(const Policy& policy);

// Presets by name: "none" (nothing), "allow-all" ({"domain": "*"}), "debian-mirrors" (every host
// named by the apt sources under etc_apt, ports 80 and 443, read now: never hard-coded), "npm"
// and "pypi" (the registries this host's npm and pip use, with their ports: registries.h).
Result<Policy> preset(std::string_view name, const std::filesystem::path& etc_apt = "/etc/apt");
// `text` is a preset name or a JSON document (what `--network-policy` and `hutch policy set` take
// after the CLI has read the file).
Result<Policy> parsePolicyText(std::string_view text,
                               const std::filesystem::path& etc_apt = "/etc/apt");

// Why a secret must not be bound to `pattern` (a domain that parsePolicy accepts), or nullopt
// when it may be: "*" would send the secret to every name, and "*.x" with a single label after
// "*." to every name of a top-level domain ("*.com"). The message says what to bind instead.
std::optional<std::string> secretDomainProblem(std::string_view pattern);

struct Decision {
  bool allowed = false;
  std::string
      reason;  // "allowed by api.example.com:443", "denied by *.evil.com", "no allow rule matches"
};

// A connection to host:port. host must be a name; an IP literal is always denied ("raw IP").
Decision decide(const Policy& policy, std::string_view host, uint16_t port);
// A DNS question for `name`: answered when some allow rule matches it on any port and no deny
// rule without ports matches it.
Decision decideName(const Policy& policy, std::string_view name);

}  // namespace hutch::egress

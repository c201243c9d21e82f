#include "egress/policy.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <system_error>

#include "egress/registries.h"

namespace hutch::egress {

namespace {

using Json = nlohmann::json;

constexpr std::string_view kInvalid = "Invalid network policy";
constexpr std::string_view kPresetNames = "none, allow-all, debian-mirrors, npm, pypi";
constexpr std::string_view kDomainsAccepted =
    "a DNS name such as \"api.example.com\", \"*.example.com\" for every name below "
    "example.com, or \"*\" for every name";

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// Lower case, without one trailing dot.
std::string normalizeName(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  std::string out(name);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

bool isDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An IPv4 or IPv6 literal in any form a resolver would take as an address: dotted quads, the
// short and hex forms inet_aton accepts ("127.1", "0x7f000001"), IPv6 with or without brackets
// or a zone.
bool isIpLiteral(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return true;
  if (host.find(':') != std::string_view::npos) {
    std::string addr(host.substr(0, host.find('%')));
    in6_addr v6{};
    return inet_pton(AF_INET6, addr.c_str(), &v6) == 1;
  }
  std::string addr(host);
  if (!addr.empty() && addr.back() == '.') addr.pop_back();
  in_addr v4{};
  if (inet_aton(addr.c_str(), &v4) != 0) return true;
  // A name whose last label is all digits is no host name (no top-level domain is numeric).
  size_t dot = addr.rfind('.');
  return isDigits(dot == std::string::npos ? addr : std::string_view(addr).substr(dot + 1));
}

// Why `name` (already normalized) is not a DNS host name, or nullopt when it is one.
std::optional<std::string> nameProblem(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.size() > 253) return "it is longer than 253 characters";
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('.', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view label = name.substr(start, end - start);
    if (label.empty()) return "it has an empty label (two dots in a row, or a leading dot)";
    if (label.size() > 63)
      return fmt::format("its label \"{}\" is longer than 63 characters", label);
    for (char c : label) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (!ok) {
        if (c == '*') return "'*' is only accepted alone or as a leading \"*.\"";
        return fmt::format("it contains '{}' (letters, digits, '-' and '_' are accepted)", c);
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return fmt::format("its label \"{}\" starts or ends with '-'", label);
    }
    start = end + 1;
  }
  return std::nullopt;
}

// A rule's domain, normalized, or an error naming `field`.
Result<std::string> parseDomain(const Json& value, const std::string& field) {
  if (!value.is_string()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} must be a string: {}", field, kDomainsAccepted));
  }
  const auto& raw = value.get_ref<const std::string&>();
  std::string domain = normalizeName(raw);
  if (domain == "*" && raw != "*.") return domain;
  std::string_view rest = domain;
  if (rest.starts_with("*.")) {
    rest.remove_prefix(2);
  } else if (rest == "*") {
    rest = {};  // "*.": nothing follows the "*."
  }
  if (isIpLiteral(rest)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} \"{}\" is an IP address; rules name hosts, never addresses: {}",
                            field, raw, kDomainsAccepted));
  }
  if (auto problem = nameProblem(rest)) {
    return fail(Errc::kInvalidArgument, fmt::format("{} \"{}\" is not a domain: {}; use {}", field,
                                                    raw, *problem, kDomainsAccepted));
  }
  return domain;
}

Result<std::vector<uint16_t>> parsePorts(const Json& value, const std::string& field) {
  constexpr std::string_view kAccepted =
      "a non-empty list of port numbers 1..65535 (leave \"ports\" out for every port)";
  if (!value.is_array() || value.empty()) {
    return fail(Errc::kInvalidArgument, fmt::format("{} must be {}", field, kAccepted));
  }
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& p = value[i];
    bool in_range = false;
    if (p.is_number_unsigned()) {
      in_range = p.get<uint64_t>() >= 1 && p.get<uint64_t>() <= 65535;
    } else if (p.is_number_integer()) {
      in_range = p.get<int64_t>() >= 1 && p.get<int64_t>() <= 65535;
    }
    if (!in_range) {
      return fail(
          Errc::kInvalidArgument,
          fmt::format("{}[{}] is {}: ports are whole numbers 1..65535", field, i, p.dump()));
    }
    auto port = static_cast<uint16_t>(p.get<int64_t>());
    if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
  }
  return ports;
}

Result<Rule> parseRule(const Json& value, const std::string& field) {
  if (!value.is_object()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} must be an object such as {{\"domain\": \"api.example.com\", "
                            "\"ports\": [443]}}",
                            field));
  }
  for (const auto& [key, _] : value.items()) {
    if (key != "domain" && key != "ports") {
      return fail(Errc::kInvalidArgument,
                  fmt::format("{} has unknown key \"{}\": a rule takes \"domain\" and \"ports\"",
                              field, key));
    }
  }
  if (!value.contains("domain")) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{}.domain is missing: give {}", field, kDomainsAccepted));
  }
  Rule rule;
  HUTCH_TRY(rule.domain, parseDomain(value["domain"], field + ".domain"));
  if (value.contains("ports")) {
    HUTCH_TRY(rule.ports, parsePorts(value["ports"], field + ".ports"));
  }
  return rule;
}

Result<std::vector<Rule>> parseRules(const Json& value, const std::string& field) {
  if (!value.is_array()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("\"{}\" must be a list of rules such as [{{\"domain\": "
                            "\"api.example.com\", \"ports\": [443]}}]",
                            field));
  }
  std::vector<Rule> rules;
  for (size_t i = 0; i < value.size(); ++i) {
    HUTCH_TRY(Rule rule, parseRule(value[i], fmt::format("{}[{}]", field, i)));
    rules.push_back(std::move(rule));
  }
  return rules;
}

std::string privateRangesText() {
  std::string out;
  for (const IpNetwork& n : privateRanges()) {
    if (!out.empty()) out += ", ";
    out += n.text();
  }
  return out;
}

// "allow_private": a list of networks, each inside one of the private ranges.
Result<std::vector<IpNetwork>> parsePrivateNetworks(const Json& value) {
  if (!value.is_array()) {
    return fail(Errc::kInvalidArgument,
                "\"allow_private\" must be a list of private networks such as "
                "[\"192.168.1.0/24\"]");
  }
  std::vector<IpNetwork> out;
  for (size_t i = 0; i < value.size(); ++i) {
    std::string field = fmt::format("allow_private[{}]", i);
    if (!value[i].is_string()) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("{} must be a string such as \"192.168.1.0/24\"", field));
    }
    auto network = parseIpNetwork(value[i].get_ref<const std::string&>());
    if (!network) return fail(network.error().withContext(field));
    auto ranges = privateRanges();
    bool inside = std::any_of(ranges.begin(), ranges.end(),
                              [&](const IpNetwork& r) { return r.contains(*network); });
    if (!inside) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("{} {} is not inside a private range ({}): public addresses need "
                              "no entry, and loopback, link-local and metadata addresses can "
                              "never be allowed",
                              field, network->text(), privateRangesText()));
    }
    if (std::find(out.begin(), out.end(), *network) == out.end()) out.push_back(*network);
  }
  return out;
}

void append(std::vector<Rule>& to, const std::vector<Rule>& rules) {
  for (const Rule& r : rules) {
    if (std::find(to.begin(), to.end(), r) == to.end()) to.push_back(r);
  }
}

// --- the debian-mirrors preset: hosts named by the apt sources -----------------------------

struct MirrorHosts {
  std::vector<std::string> order;                      // first seen first
  std::map<std::string, std::vector<uint16_t>> ports;  // empty: the default ports 80 and 443
};

// Adds the host of an apt source URI ("http://user:pw@host:8080/debian"); other schemes
// (file:, cdrom:, copy:, mirror+...) name no host to reach and are skipped, as are addresses.
void addUri(std::string_view uri, MirrorHosts& hosts) {
  size_t colon = uri.find("://");
  if (colon == std::string_view::npos) return;
  std::string scheme = normalizeName(uri.substr(0, colon));
  if (scheme != "http" && scheme != "https") return;
  std::string_view rest = uri.substr(colon + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  std::string_view host = rest;
  std::optional<uint16_t> port;
  if (rest.starts_with('[')) return;  // an IPv6 address
  if (size_t c = rest.rfind(':'); c != std::string_view::npos) {
    host = rest.substr(0, c);
    std::string_view p = rest.substr(c + 1);
    if (!p.empty()) {
      if (!isDigits(p) || p.size() > 5) return;
      int n = std::stoi(std::string(p));
      if (n < 1 || n > 65535) return;
      port = static_cast<uint16_t>(n);
    }
  }
  std::string name = normalizeName(host);
  if (isIpLiteral(name) || nameProblem(name)) return;
  auto [it, inserted] = hosts.ports.try_emplace(name);
  if (inserted) hosts.order.push_back(name);
  std::vector<uint16_t> wanted =
      port ? std::vector<uint16_t>{*port} : std::vector<uint16_t>{80, 443};
  for (uint16_t p : wanted) {
    if (std::find(it->second.begin(), it->second.end(), p) == it->second.end()) {
      it->second.push_back(p);
    }
  }
}

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t b = s.find_first_not_of(" \t\r", i);
    if (b == std::string_view::npos) break;
    size_t e = s.find_first_of(" \t\r", b);
    if (e == std::string_view::npos) e = s.size();
    out.push_back(s.substr(b, e - b));
    i = e;
  }
  return out;
}

// One-line format: "deb [ options ] uri suite [component...]", '#' starts a comment.
void parseOneLineSources(std::string_view text, MirrorHosts& hosts) {
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::string_view l = line;
    l = l.substr(0, l.find('#'));
    auto w = words(l);
    if (w.size() < 2 || (w[0] != "deb" && w[0] != "deb-src")) continue;
    size_t i = 1;
    if (w[i].starts_with('[')) {
      while (i < w.size() && !w[i].ends_with(']')) ++i;
      ++i;  // past the word that closes the options
    }
    if (i < w.size()) addUri(w[i], hosts);
  }
}

bool isFalse(std::string_view value) {
  std::string v = normalizeName(trim(value));
  return v == "no" || v == "false" || v == "off" || v == "0" || v == "disable";
}

// deb822 format: stanzas separated by blank lines, "Field: value" with continuation lines that
// start with a space or a tab; '#' lines are comments.
void parseDeb822Sources(std::string_view text, MirrorHosts& hosts) {
  struct Stanza {
    std::vector<std::string> uris;
    bool enabled = true;
  };
  Stanza stanza;
  std::string field;
  auto flush = [&] {
    if (stanza.enabled) {
      for (const auto& uri : stanza.uris) addUri(uri, hosts);
    }
    stanza = Stanza{};
    field.clear();
  };
  auto value = [&](std::string_view v) {
    if (field == "uris") {
      for (auto w : words(v)) stanza.uris.emplace_back(w);
    } else if (field == "enabled" && isFalse(v)) {
      stanza.enabled = false;
    }
  };
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::string_view l = line;
    if (trim(l).empty()) {
      flush();
      continue;
    }
    if (l.starts_with('#')) continue;
    if (l.starts_with(' ') || l.starts_with('\t')) {
      value(l);
      continue;
    }
    size_t colon = l.find(':');
    if (colon == std::string_view::npos) continue;
    field = normalizeName(trim(l.substr(0, colon)));
    value(l.substr(colon + 1));
  }
  flush();
}

Result<std::string> readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    return fail(Errc::kInternal,
                fmt::format("Cannot read apt sources {}: check that it is readable", path.string()),
                err);
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Result<Policy> debianMirrors(const std::filesystem::path& etc_apt) {
  MirrorHosts hosts;
  std::error_code ec;
  auto list = etc_apt / "sources.list";
  if (std::filesystem::is_regular_file(list, ec)) {
    HUTCH_TRY(std::string text, readFile(list));
    parseOneLineSources(text, hosts);
  }
  auto dir = etc_apt / "sources.list.d";
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(dir, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const auto& p = entry.path();
      if ((p.extension() == ".list" || p.extension() == ".sources") && entry.is_regular_file(ec)) {
        files.push_back(p);
      }
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    HUTCH_TRY(std::string text, readFile(p));
    if (p.extension() == ".list") {
      parseOneLineSources(text, hosts);
    } else {
      parseDeb822Sources(text, hosts);
    }
  }
  if (hosts.order.empty()) {
    return fail(Errc::kNotFound,
                fmt::format("The debian-mirrors preset found no http or https apt source in {0}, "
                            "{1}/*.list or {1}/*.sources: configure apt on this host, or name the "
                            "mirrors in an allow rule instead",
                            list.string(), dir.string()));
  }
  Policy policy;
  for (const auto& host : hosts.order) {
    auto ports = hosts.ports[host];
    std::sort(ports.begin(), ports.end());
    policy.allow.push_back(Rule{host, ports});
  }
  return policy;
}

// --- decisions -----------------------------------------------------------------------------

bool matches(std::string_view pattern_raw, std::string_view name) {
  std::string pattern = normalizeName(pattern_raw);
  if (pattern == "*") return true;
  if (pattern.starts_with("*.")) {
    std::string_view suffix = std::string_view(pattern).substr(1);  // ".example.com"
    return name.size() > suffix.size() && name.ends_with(suffix);
  }
  return name == pattern;
}

bool hasPort(const Rule& rule, uint16_t port) {
  return rule.ports.empty() ||
         std::find(rule.ports.begin(), rule.ports.end(), port) != rule.ports.end();
}

std::string describe(const Rule& rule, std::optional<uint16_t> port) {
  if (rule.ports.empty() || !port) return rule.domain;
  return fmt::format("{}:{}", rule.domain, *port);
}

// The decision when `host` cannot be decided on by name, or nullopt.
std::optional<Decision> unnamed(std::string_view host, const std::string& name) {
  if (isIpLiteral(host) || isIpLiteral(name)) return Decision{false, "raw IP address"};
  if (nameProblem(name)) return Decision{false, "invalid host name"};
  return std::nullopt;
}

}  // namespace

Result<Policy> parsePolicy(const nlohmann::json& doc, const std::filesystem::path& etc_apt) {
  if (!doc.is_object()) {
    return fail(Errc::kInvalidArgument,
                "A network policy must be a JSON object with \"allow\", \"deny\" and \"presets\"");
  }
  for (const auto& [key, _] : doc.items()) {
    if (key != "allow" && key != "deny" && key != "presets" && key != "allow_private") {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Unknown key \"{}\" in the network policy: accepted keys are "
                              "\"allow\", \"deny\", \"presets\" and \"allow_private\"",
                              key));
    }
  }
  Policy policy;
  if (doc.contains("allow")) {
    auto allow = parseRules(doc["allow"], "allow");
    if (!allow) return fail(allow.error().withContext(kInvalid));
    policy.allow = std::move(*allow);
  }
  if (doc.contains("deny")) {
    auto deny = parseRules(doc["deny"], "deny");
    if (!deny) return fail(deny.error().withContext(kInvalid));
    policy.deny = std::move(*deny);
  }
  if (doc.contains("allow_private")) {
    auto networks = parsePrivateNetworks(doc["allow_private"]);
    if (!networks) return fail(networks.error().withContext(kInvalid));
    policy.allow_private = std::move(*networks);
  }
  if (doc.contains("presets")) {
    const Json& presets = doc["presets"];
    if (!presets.is_array()) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("{}: \"presets\" must be a list of preset names ({})", kInvalid,
                              kPresetNames));
    }
    for (size_t i = 0; i < presets.size(); ++i) {
      std::string field = fmt::format("presets[{}]", i);
      if (!presets[i].is_string()) {
        return fail(Errc::kInvalidArgument, fmt::format("{}: {} must be a preset name ({})",
                                                        kInvalid, field, kPresetNames));
      }
      auto added = preset(presets[i].get_ref<const std::string&>(), etc_apt);
      if (!added) return fail(added.error().withContext(fmt::format("{}: {}", kInvalid, field)));
      append(policy.allow, added->allow);
      append(policy.deny, added->deny);
    }
  }
  return policy;
}

nlohmann::json toJson(const Policy& policy) {
  auto rules = [](const std::vector<Rule>& rs) {
    Json out = Json::array();
    for (const Rule& r : rs) {
      Json rule = {{"domain", r.domain}};
      if (!r.ports.empty()) rule["ports"] = r.ports;
      out.push_back(std::move(rule));
    }
    return out;
  };
  Json out = {{"allow", rules(policy.allow)}, {"deny", rules(policy.deny)}};
  if (!policy.allow_private.empty()) {
    Json networks = Json::array();
    for (const IpNetwork& n : policy.allow_private) networks.push_back(n.text());
    out["allow_private"] = std::move(networks);
  }
  return out;
}

Result<Policy> preset(std::string_view name, const std::filesystem::path& etc_apt) {
  if (name == "none") return Policy{};
  if (name == "allow-all") return Policy{{Rule{"*", {}}}, {}};
  if (name == "debian-mirrors") return debianMirrors(etc_apt);
  if (name == "npm" || name == "pypi") {
    HUTCH_TRY(std::vector<Registry> registries, hostRegistries(name));
    Policy policy;
    for (const Registry& r : registries) {
      Rule rule{r.host, {r.port}};
      if (std::find(policy.allow.begin(), policy.allow.end(), rule) == policy.allow.end()) {
        policy.allow.push_back(std::move(rule));
      }
    }
    return policy;
  }
  return fail(Errc::kInvalidArgument,
              fmt::format("Unknown preset \"{}\": accepted presets are {}", name, kPresetNames));
}

Result<Policy> parsePolicyText(std::string_view text, const std::filesystem::path& etc_apt) {
  std::string_view t = trim(text);
  if (t.empty()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The network policy is empty: give a preset name ({}) or a JSON "
                            "document",
                            kPresetNames));
  }
  if (t.front() != '{') {
    if (t == "none" || t == "allow-all" || t == "debian-mirrors" || t == "npm" || t == "pypi") {
      return preset(t, etc_apt);
    }
    return fail(Errc::kInvalidArgument,
                fmt::format("Unknown network policy \"{}\": give a preset name ({}) or a JSON "
                            "document such as {{\"allow\": [{{\"domain\": \"api.example.com\"}}]}}",
                            t, kPresetNames));
  }
  Json doc;
  try {
    doc = Json::parse(t);
  } catch (const Json::parse_error& e) {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("The network policy is not valid JSON (at byte {}): fix the document", e.byte));
  } catch (const Json::exception&) {
    // Syntax that parses into no value: a number too large for a double (out_of_range 406).
    return fail(Errc::kInvalidArgument,
                "The network policy is not valid JSON (a number out of range): fix the document");
  }
  return parsePolicy(doc, etc_apt);
}

std::optional<std::string> secretDomainProblem(std::string_view pattern_raw) {
  std::string pattern = normalizeName(pattern_raw);
  if (pattern == "*") {
    return fmt::format(
        "\"{}\" would send the secret to every host: bind it to the API's own name, such as "
        "api.example.com",
        pattern_raw);
  }
  if (pattern.starts_with("*.") && pattern.find('.', 2) == std::string::npos) {
    return fmt::format(
        "\"{}\" would send the secret to every name under the top-level domain \"{}\": bind "
        "it to the API's own name (api.example.com) or to one domain's names (*.example.com)",
        pattern_raw, pattern.substr(2));
  }
  return std::nullopt;
}

Decision decide(const Policy& policy, std::string_view host, uint16_t port) {
  std::string name = normalizeName(host);
  if (auto d = unnamed(host, name)) return *d;
  for (const Rule& rule : policy.deny) {
    if (matches(rule.domain, name) && hasPort(rule, port)) {
      return {false, "denied by " + describe(rule, port)};
    }
  }
  for (const Rule& rule : policy.allow) {
    if (matches(rule.domain, name) && hasPort(rule, port)) {
      return {true, "allowed by " + describe(rule, port)};
    }
  }
  return {false, "no allow rule matches"};
}

Decision decideName(const Policy& policy, std::string_view name_raw) {
  std::string name = normalizeName(name_raw);
  if (auto d = unnamed(name_raw, name)) return *d;
  for (const Rule& rule : policy.deny) {
    if (rule.ports.empty() && matches(rule.domain, name)) {
      return {false, "denied by " + rule.domain};
    }
  }
  for (const Rule& rule : policy.allow) {
    if (matches(rule.domain, name)) return {true, "allowed by " + rule.domain};
  }
  return {false, "no allow rule matches"};
}

}  // namespace hutch::egress

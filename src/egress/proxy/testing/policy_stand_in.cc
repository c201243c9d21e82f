// TEST-ONLY stand-in for src/egress/policy.cc (branch egress-policy), linked into the proxy
// tests only while that file is absent. It implements just what the proxy calls, with the
// semantics policy.h documents; the real implementation replaces it at the merge.
#include <algorithm>
#include <cctype>

#include "egress/policy.h"

namespace hutch::egress {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

bool isIpLiteral(std::string_view host) {
  if (host.find(':') != std::string_view::npos || host.find('[') != std::string_view::npos) {
    return true;
  }
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '.';
  });
}

bool matches(const Rule& rule, const std::string& host) {
  std::string d = lower(rule.domain);
  if (d == "*") return true;
  if (d.rfind("*.", 0) == 0) {
    std::string suffix = d.substr(1);
    return host.size() > suffix.size() &&
           host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  return d == host;
}

bool portMatches(const Rule& rule, uint16_t port) {
  return rule.ports.empty() ||
         std::find(rule.ports.begin(), rule.ports.end(), port) != rule.ports.end();
}

Result<std::vector<Rule>> parseRules(const nlohmann::json& list) {
  std::vector<Rule> out;
  if (list.is_null()) return out;
  if (!list.is_array()) return fail(Errc::kInvalidArgument, "rules must be an array");
  for (const auto& item : list) {
    if (!item.is_object() || !item.contains("domain") || !item["domain"].is_string()) {
      return fail(Errc::kInvalidArgument, "a rule needs a \"domain\"");
    }
    Rule rule;
    rule.domain = item["domain"].get<std::string>();
    if (rule.domain.empty() || rule.domain.find("..") != std::string::npos ||
        (rule.domain.find('*') != std::string::npos && rule.domain != "*" &&
         rule.domain.rfind("*.", 0) != 0) ||
        isIpLiteral(rule.domain)) {
      return fail(Errc::kInvalidArgument, "bad domain \"" + rule.domain + "\"");
    }
    if (item.contains("ports")) {
      for (const auto& p : item["ports"]) {
        if (!p.is_number_integer() || p.get<int>() < 1 || p.get<int>() > 65535) {
          return fail(Errc::kInvalidArgument, "ports must be 1..65535");
        }
        rule.ports.push_back(static_cast<uint16_t>(p.get<int>()));
      }
    }
    out.push_back(std::move(rule));
  }
  return out;
}

}  // namespace

Result<Policy> parsePolicy(const nlohmann::json& doc, const std::filesystem::path&) {
  if (!doc.is_object()) return fail(Errc::kInvalidArgument, "a policy must be an object");
  for (const auto& [key, value] : doc.items()) {
    if (key != "allow" && key != "deny") {
      return fail(Errc::kInvalidArgument, "unknown policy key \"" + key + "\"");
    }
  }
  Policy policy;
  HUTCH_TRY(policy.allow, parseRules(doc.value("allow", nlohmann::json())));
  HUTCH_TRY(policy.deny, parseRules(doc.value("deny", nlohmann::json())));
  return policy;
}

nlohmann::json toJson(const Policy& policy) {
  auto rules = [](const std::vector<Rule>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const Rule& r : list) {
      nlohmann::json j = {{"domain", r.domain}};
      if (!r.ports.empty()) j["ports"] = r.ports;
      out.push_back(j);
    }
    return out;
  };
  return {{"allow", rules(policy.allow)}, {"deny", rules(policy.deny)}};
}

Decision decide(const Policy& policy, std::string_view raw_host, uint16_t port) {
  std::string host = lower(raw_host);
  if (isIpLiteral(host)) return {false, "raw IP"};
  for (const Rule& r : policy.deny) {
    if (matches(r, host) && portMatches(r, port)) return {false, "denied by " + r.domain};
  }
  for (const Rule& r : policy.allow) {
    if (matches(r, host) && portMatches(r, port)) return {true, "allowed by " + r.domain};
  }
  return {false, "no allow rule matches"};
}

}  // namespace hutch::egress

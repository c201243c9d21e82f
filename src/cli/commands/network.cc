// hutch policy set|show|log and hutch secret set|ls|rm: a box's egress policy and its log, and
// the host's secrets (docs/network.md).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>

#include "cli/commands/commands.h"

namespace hutch::cli {

using boost::beast::http::verb;
using nlohmann::json;

Result<json> policyArgument(const std::string& arg) {
  if (arg == "none" || arg == "allow-all" || arg == "debian-mirrors" || arg == "npm" ||
      arg == "pypi")
    return json(arg);
  std::string text;
  if (arg == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::ifstream in(arg);
    if (!in) {
      return fail(Errc::kNotFound,
                  fmt::format("Cannot read the policy file '{}': give a JSON file, '-' for stdin, "
                              "or a preset (none, allow-all, debian-mirrors)",
                              arg));
    }
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The policy in '{}' is not a JSON object (see docs/network.md for the "
                            "format: {{\"allow\": [{{\"domain\": \"api.example.com\"}}]}})",
                            arg));
  }
  return doc;
}

namespace {

std::string ruleText(const json& rule) {
  std::string text = rule.value("domain", "?");
  if (rule.contains("ports") && rule["ports"].is_array() && !rule["ports"].empty()) {
    std::vector<std::string> ports;
    for (const auto& p : rule["ports"]) ports.push_back(p.dump());
    text += ":" + fmt::format("{}", fmt::join(ports, ","));
  }
  return text;
}

void printPolicy(const json& answer) {
  const json& policy = answer["policy"];
  std::vector<std::vector<std::string>> rows;
  for (const char* kind : {"deny", "allow"}) {
    if (!policy.contains(kind)) continue;
    for (const auto& rule : policy[kind]) rows.push_back({kind, ruleText(rule)});
  }
  if (policy.contains("allow_private")) {
    for (const auto& network : policy["allow_private"]) {
      rows.push_back({"private", network.get<std::string>()});
    }
  }
  if (rows.empty()) {
    fmt::print("{}: no allow rule: nothing is reachable (preset none)\n",
               answer.value("name", "?"));
    return;
  }
  printTable({"RULE", "DESTINATION"}, rows);
}

void printEntry(const json& e) {
  std::string dest = e.value("host", "");
  if (dest.empty()) dest = e.value("address", "");
  uint16_t port = e.value("port", uint16_t{0});
  if (port != 0) dest += fmt::format(":{}", port);
  fmt::print("{}  {:<7} {:<5} {:<40} {:>9} {:>9}  {}\n", clockTime(e.value("time_ms", int64_t{0})),
             e.value("proto", ""), e.value("decision", ""), dest, e.value("bytes_up", uint64_t{0}),
             e.value("bytes_down", uint64_t{0}), e.value("reason", ""));
}

}  // namespace

int cmdPolicySet(const ApiClient& client, const Output& out, const std::string& box,
                 const std::string& file) {
  auto policy = policyArgument(file);
  if (!policy) return reportError(out, policy.error());
  auto set = client.call(verb::put, "/v1/boxes/" + box + "/policy", json{{"policy", *policy}});
  if (!set) return reportError(out, set.error());
  if (out.json) {
    printJson(*set);
  } else {
    printPolicy(*set);
  }
  return 0;
}

int cmdPolicyShow(const ApiClient& client, const Output& out, const std::string& box) {
  auto got = client.call(verb::get, "/v1/boxes/" + box + "/policy");
  if (!got) return reportError(out, got.error());
  if (out.json) {
    printJson(*got);
  } else {
    printPolicy(*got);
  }
  return 0;
}

int cmdPolicyLog(const ApiClient& client, const Output& out, const std::string& box, bool follow) {
  uint64_t after = 0;
  bool header = !out.json;
  for (;;) {
    auto page = client.call(verb::get, fmt::format("/v1/boxes/{}/policy/log?after={}", box, after));
    if (!page) return reportError(out, page.error());
    if (header) {
      fmt::print("{:<23}  {:<7} {:<5} {:<40} {:>9} {:>9}  {}\n", "TIME", "PROTO", "DECISION",
                 "DESTINATION", "UP", "DOWN", "REASON");
      header = false;
    }
    for (const auto& e : (*page)["entries"]) {
      if (out.json) {
        fmt::print("{}\n", e.dump());  // one object per line, as it arrives
      } else {
        printEntry(e);
      }
    }
    std::fflush(stdout);
    uint64_t next = page->value("next", after);
    bool more = next != after && (*page)["entries"].size() >= 1000;
    after = next;
    if (more) continue;
    if (!follow) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int cmdSecretSet(const ApiClient& client, const Output& out, const SecretOptions& options) {
  if (::isatty(STDIN_FILENO)) {
    std::fprintf(stderr, "Value of %s (then Enter): ", options.name.c_str());
  }
  std::string value;
  std::getline(std::cin, value);
  while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  json body{{"value", value}, {"domains", options.domains}};
  if (!options.header.empty()) body["header"] = options.header;
  if (!options.format.empty()) body["format"] = options.format;
  auto set = client.call(verb::put, "/v1/secrets/" + options.name, body);
  if (!set) return reportError(out, set.error());
  if (out.json) {
    printJson(*set);
  } else {
    fmt::print("{}\n", options.name);
  }
  return 0;
}

int cmdSecretList(const ApiClient& client, const Output& out) {
  auto got = client.call(verb::get, "/v1/secrets");
  if (!got) return reportError(out, got.error());
  if (out.json) {
    printJson((*got)["secrets"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : (*got)["secrets"]) {
    std::vector<std::string> domains = s.value("domains", std::vector<std::string>{});
    std::string header = s.value("header", "");
    rows.push_back(
        {s.value("name", ""), fmt::format("{}", fmt::join(domains, ",")),
         header.empty() ? "placeholder in headers" : header + ": " + s.value("format", "{value}")});
  }
  printTable({"NAME", "DOMAINS", "INJECTED AS"}, rows);
  return 0;
}

int cmdSecretRemove(const ApiClient& client, const Output& out,
                    const std::vector<std::string>& names) {
  int code = 0;
  for (const auto& name : names) {
    auto removed = client.call(verb::delete_, "/v1/secrets/" + name);
    if (!removed) {
      code = reportError(out, removed.error());
      continue;
    }
    if (!out.json) fmt::print("{}\n", name);
  }
  return code;
}

}  // namespace hutch::cli

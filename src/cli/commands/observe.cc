// hutch events and hutch audit (docs/observability.md): what happened to boxes and keys, and
// the tamper-evident record of what was done in boxes.
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <ctime>

#include "cli/commands/commands.h"

namespace hutch::cli {

namespace {

using verb = boost::beast::http::verb;

// The fields of an event's data worth a glance, "k=v k=v", in a fixed order first.
std::string summary(const json& data) {
  std::string out;
  for (const auto& [k, v] : data.items()) {
    if (!out.empty()) out += ' ';
    std::string value = v.is_string() ? v.get<std::string>() : v.dump();
    if (value.size() > 80) value = value.substr(0, 77) + "...";
    out += k + "=" + value;
  }
  return out;
}

void printEvent(const json& e) {
  std::string box = "-";
  if (e.contains("box") && e["box"].is_object()) {
    box = fmt::format("{} ({})", e["box"].value("name", ""), e["box"].value("id", ""));
  }
  fmt::print("{}  {:<20} {:<30} {}\n", clockTime(e.value("time_ms", int64_t{0})),
             e.value("type", ""), box, summary(e.value("data", json::object())));
}

void printRecord(const json& r) {
  std::string who = "host";
  if (r.contains("actor") && !r["actor"].value("key_id", "").empty()) {
    who = "key " + r["actor"].value("key_name", "") + " (" + r["actor"].value("key_id", "") + ")";
  }
  std::string box = r.value("box_id", "").empty()
                        ? "-"
                        : fmt::format("{} ({})", r.value("box_name", ""), r.value("box_id", ""));
  fmt::print("{:>6}  {}  {:<14} {:<24} {:<30} {}\n", r.value("seq", int64_t{0}),
             clockTime(r.value("time_ms", int64_t{0})), r.value("type", ""), who, box,
             summary(r.value("data", json::object())));
}

}  // namespace

Result<int64_t> parseSince(const std::string& text) {
  if (text.empty()) return int64_t{0};
  // A duration back from now ("90s", "10m", "2h", "1d"), or unix seconds.
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || n < 0) {
    return fail(Errc::kInvalidArgument,
                fmt::format("--since {}: give a duration such as 30s, 10m, 2h or 1d, or unix "
                            "seconds",
                            text));
  }
  std::string_view unit(end, text.data() + text.size() - end);
  int64_t scale = 0;
  if (unit == "s") scale = 1;
  if (unit == "m") scale = 60;
  if (unit == "h") scale = 3600;
  if (unit == "d") scale = 86400;
  if (unit.empty()) return n;  // unix seconds
  if (scale == 0) {
    return fail(Errc::kInvalidArgument,
                fmt::format("--since {}: the unit must be s, m, h or d", text));
  }
  return static_cast<int64_t>(std::time(nullptr)) - n * scale;
}

int cmdEvents(const ApiClient& client, const Output& out, const EventsOptions& options) {
  auto since = parseSince(options.since);
  if (!since) return reportError(out, since.error());
  std::string query = fmt::format("since={}", *since);
  if (!options.box.empty()) query += "&box=" + percentEncode(options.box);
  if (!options.types.empty()) {
    std::string types;
    for (const auto& t : options.types) types += (types.empty() ? "" : ",") + t;
    query += "&type=" + percentEncode(types);
  }
  bool header = !out.json;
  auto print = [&](const json& e) {
    if (out.json) {
      fmt::print("{}\n", e.dump());
    } else {
      if (header) {
        fmt::print("{:<23}  {:<20} {:<30} {}\n", "TIME", "TYPE", "BOX", "DETAILS");
        header = false;
      }
      printEvent(e);
    }
    std::fflush(stdout);
  };
  if (options.follow) {
    auto streamed =
        client.streamLines(verb::get, "/v1/events?follow=1&" + query, std::nullopt, print);
    if (!streamed) return reportError(out, streamed.error());
    return 0;
  }
  int64_t after = 0;
  for (;;) {
    auto page = client.call(verb::get, fmt::format("/v1/events?{}&after={}", query, after));
    if (!page) return reportError(out, page.error());
    for (const auto& e : (*page)["events"]) print(e);
    int64_t last = page->value("last_id", after);
    if ((*page)["events"].size() < 1000 || last == after) return 0;
    after = last;
  }
}

int cmdAudit(const ApiClient& client, const Output& out, const AuditOptions& options) {
  auto since = parseSince(options.since);
  if (!since) return reportError(out, since.error());
  std::string query = fmt::format("since={}", *since);
  if (!options.box.empty()) query += "&box=" + percentEncode(options.box);
  bool header = !out.json;
  int64_t after = 0;
  for (;;) {
    auto page = client.call(verb::get, fmt::format("/v1/audit?{}&after={}", query, after));
    if (!page) return reportError(out, page.error());
    for (const auto& r : (*page)["records"]) {
      if (out.json) {
        fmt::print("{}\n", r.dump());
        continue;
      }
      if (header) {
        fmt::print("{:>6}  {:<23}  {:<14} {:<24} {:<30} {}\n", "SEQ", "TIME", "TYPE", "BY", "BOX",
                   "DETAILS");
        header = false;
      }
      printRecord(r);
    }
    const json& records = (*page)["records"];
    if (records.size() < 1000) return 0;
    after = records.back().value("seq", after);
  }
}

int cmdAuditVerify(const ApiClient& client, const Output& out) {
  auto verdict = client.call(verb::get, "/v1/audit/verify");
  if (!verdict) return reportError(out, verdict.error());
  const bool intact = verdict->value("intact", false);
  if (out.json) {
    printJson(*verdict);
  } else if (intact) {
    fmt::print("The audit log is intact: {} records, the last is {} ({}).\n",
               verdict->value("records", int64_t{0}), (*verdict)["head"].value("seq", int64_t{0}),
               (*verdict)["head"].value("hash", ""));
  } else {
    const json& broken = (*verdict)["broken"];
    fmt::print(
        "The audit log is NOT intact: it breaks at line {} (record {}): {}.\n"
        "{} records before it check out. The log is {}.\n",
        broken.value("line", int64_t{0}), broken.value("seq", int64_t{0}),
        broken.value("reason", ""), verdict->value("records", int64_t{0}),
        verdict->value("path", ""));
  }
  // Like cmp and diff: 1 for "not intact", so a script can tell it from a failed call.
  return intact ? 0 : 1;
}

}  // namespace hutch::cli

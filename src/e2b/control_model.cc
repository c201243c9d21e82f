#include "e2b/control_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <tuple>

namespace hutch::e2b {

namespace {

// An IP address or range ("8.8.8.8", "10.0.0.0/8", "2001:db8::/32"): names never have ':' or
// '/', and a name of digits and dots only is an address.
bool isAddress(const std::string& s) {
  return s.find_first_of(":/") != std::string::npos ||
         s.find_first_not_of("0123456789.") == std::string::npos;
}

bool isEverything(const std::string& s) {
  return s == "0.0.0.0/0" || s == "::/0";
}

template <class T>
bool parseNumber(std::string_view text, T& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t daysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

std::string pageToken(const box::Box& b) {
  return fmt::format("{}_{}", createdNanos(b), b.id);
}

}  // namespace

// ---- network ----

Result<std::string> egressPolicy(const NetworkRequest& network, std::string_view e2b_default) {
  const bool internet = network.allow_internet_access.value_or(true);
  if (!internet && network.allow_out.empty()) return std::string("none");
  if (network.allow_out.empty() && network.deny_out.empty()) return std::string(e2b_default);
  nlohmann::json allow = nlohmann::json::array();
  nlohmann::json deny = nlohmann::json::array();
  bool deny_all = !internet;
  for (const auto& d : network.deny_out) {
    if (isEverything(d)) {
      deny_all = true;
    } else if (isAddress(d)) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("denyOut '{}': hutch's egress decides on names (a TLS server name, "
                              "an HTTP host), not addresses, so of address ranges only 0.0.0.0/0 "
                              "(everything) can be denied; deny domains instead (docs/network.md)",
                              d));
    } else {
      deny.push_back({{"domain", d}});
    }
  }
  for (const auto& a : network.allow_out) {
    if (isAddress(a)) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("allowOut '{}': hutch's egress decides on names (a TLS server name, "
                              "an HTTP host) and never connects to a bare address; allow the "
                              "domain names instead (docs/network.md)",
                              a));
    }
    allow.push_back({{"domain", a}});
  }
  if (!deny_all) allow.push_back({{"domain", "*"}});
  return nlohmann::json{{"allow", allow}, {"deny", deny}}.dump();
}

// ---- lifetimes ----

int64_t timeoutExpiry(int64_t now, int64_t timeout_s) {
  return now + std::max<int64_t>(timeout_s, 0);
}

int64_t connectExpiry(int64_t expires_at, int64_t now, int64_t timeout_s, bool resumed) {
  if (timeout_s <= 0) return expires_at;
  if (resumed) return now + timeout_s;
  if (expires_at == 0) return 0;
  return std::max(expires_at, now + timeout_s);
}

box::Expiry expiryAction(const box::Box& b) {
  if (b.on_expiry != box::Expiry::kNone) return b.on_expiry;
  auto it = b.metadata.find(std::string(kAutoPauseMetadataKey));
  return it != b.metadata.end() && it->second == "true" ? box::Expiry::kSuspend
                                                        : box::Expiry::kRemove;
}

// ---- Sandbox.list ----

Result<int64_t> parseRfc3339(std::string_view text) {
  auto bad = [&] {
    return fail(Errc::kInvalidArgument,
                fmt::format("'{}' is not an RFC 3339 time (like 2026-08-22T10:00:00Z)", text));
  };
  // YYYY-MM-DDTHH:MM:SS
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[13] != ':' || text[16] != ':' ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ')) {
    return bad();
  }
  int64_t year = 0;
  unsigned month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!parseNumber(text.substr(0, 4), year) || !parseNumber(text.substr(5, 2), month) ||
      !parseNumber(text.substr(8, 2), day) || !parseNumber(text.substr(11, 2), hour) ||
      !parseNumber(text.substr(14, 2), minute) || !parseNumber(text.substr(17, 2), second) ||
      month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return bad();
  }
  std::string_view rest = text.substr(19);
  int64_t nanos = 0;
  if (rest.starts_with('.')) {
    rest.remove_prefix(1);
    size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') {
      if (digits < 9) nanos = nanos * 10 + (rest[digits] - '0');
      ++digits;
    }
    if (digits == 0) return bad();
    for (size_t i = digits; i < 9; ++i) nanos *= 10;
    rest.remove_prefix(digits);
  }
  int64_t offset_s = 0;
  if (rest == "Z" || rest == "z") {
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-' || rest[0] == ' ') &&
             rest[3] == ':') {
    // ' ': a '+' that a query string decoded as a space.
    unsigned oh = 0, om = 0;
    if (!parseNumber(rest.substr(1, 2), oh) || !parseNumber(rest.substr(4, 2), om) || oh > 23 ||
        om > 59) {
      return bad();
    }
    offset_s = (rest[0] == '-' ? -1 : 1) * static_cast<int64_t>(oh * 3600 + om * 60);
  } else {
    return bad();
  }
  const int64_t seconds =
      daysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  // Nanoseconds since 1970 fit in 64 bits until 2262: later times are "never", earlier ones
  // "always" (a startedAfter of 2999 matches nothing, it does not wrap around).
  constexpr int64_t kMaxSeconds = std::numeric_limits<int64_t>::max() / 1000000000 - 1;
  if (seconds > kMaxSeconds) return std::numeric_limits<int64_t>::max();
  if (seconds < -kMaxSeconds) return std::numeric_limits<int64_t>::min();
  return seconds * 1000000000 + nanos;
}

Result<ListQuery> parseListQuery(const std::map<std::string, std::string, std::less<>>& query,
                                 std::map<std::string, std::string> metadata) {
  ListQuery out;
  out.metadata = std::move(metadata);
  auto value = [&](std::string_view key) -> std::string {
    auto it = query.find(key);
    return it == query.end() ? std::string() : it->second;
  };
  const std::string states = value("state");
  for (size_t start = 0; start < states.size();) {
    size_t comma = states.find(',', start);
    if (comma == std::string::npos) comma = states.size();
    if (comma > start) out.states.push_back(states.substr(start, comma - start));
    start = comma + 1;
  }
  out.template_id = value("template");
  if (std::string after = value("startedAfter"); !after.empty()) {
    HUTCH_TRY(out.started_after_ns, parseRfc3339(after));
  }
  if (std::string order = value("order"); !order.empty()) {
    if (order != "asc" && order != "desc") {
      return fail(Errc::kInvalidArgument, "order must be asc or desc (newest first, the default)");
    }
    out.newest_first = order == "desc";
  }
  if (std::string limit = value("limit"); !limit.empty()) {
    size_t n = 0;
    if (!parseNumber(limit, n) || n < 1 || n > 1000) {
      return fail(Errc::kInvalidArgument, "limit must be a number 1-1000");
    }
    out.limit = n;
  }
  if (std::string token = value("nextToken"); !token.empty()) {
    const size_t sep = token.find('_');
    int64_t nanos = 0;
    if (sep == std::string::npos || !parseNumber(std::string_view(token).substr(0, sep), nanos)) {
      return fail(Errc::kInvalidArgument,
                  "nextToken is not one this server gave (X-Next-Token); list from the start");
    }
    out.after = std::make_pair(nanos, token.substr(sep + 1));
  }
  return out;
}

int64_t createdNanos(const box::Box& b) {
  constexpr int64_t kNanos = 1000000000;
  auto it = b.metadata.find(std::string(kCreatedMetadataKey));
  int64_t stamp = 0;
  if (it != b.metadata.end() && parseNumber(it->second, stamp) && stamp / kNanos == b.created_at) {
    return stamp;  // a fork copies its parent's record: only one of this second counts
  }
  return b.created_at * kNanos;
}

ListPage listPage(std::vector<box::Box> boxes, const ListQuery& query) {
  auto matches = [&](const box::Box& b) {
    for (const auto& [k, v] : query.metadata) {
      auto m = b.metadata.find(k);
      if (m == b.metadata.end() || m->second != v) return false;
    }
    if (!query.states.empty() && std::find(query.states.begin(), query.states.end(),
                                           sandboxState(b)) == query.states.end()) {
      return false;
    }
    if (!query.template_id.empty() && templateIdOf(b) != query.template_id &&
        b.config.template_name != query.template_id) {
      return false;
    }
    // Started at or after: a client passes back a startedAt, which has whole seconds.
    return !query.started_after_ns || createdNanos(b) >= *query.started_after_ns;
  };
  std::erase_if(boxes, [&](const box::Box& b) { return !matches(b); });
  using Key = std::tuple<int64_t, std::string>;
  auto key = [](const box::Box& b) { return Key(createdNanos(b), b.id); };
  auto before = [&](const Key& a, const Key& b) { return query.newest_first ? b < a : a < b; };
  std::sort(boxes.begin(), boxes.end(),
            [&](const box::Box& a, const box::Box& b) { return before(key(a), key(b)); });
  ListPage page;
  for (auto& b : boxes) {
    if (query.after && !before(Key(query.after->first, query.after->second), key(b))) continue;
    if (page.items.size() == query.limit) {
      page.next_token = pageToken(page.items.back());
      break;
    }
    page.items.push_back(std::move(b));
  }
  return page;
}

// ---- getMetrics ----

std::optional<int64_t> metricTime(int64_t now, int64_t started, std::optional<int64_t> start,
                                  std::optional<int64_t> end) {
  if (start && end && *end < *start) return std::nullopt;
  if (end && *end < started) return std::nullopt;
  if (start && *start > now) return std::nullopt;
  return end ? std::min(now, *end) : now;
}

}  // namespace hutch::e2b

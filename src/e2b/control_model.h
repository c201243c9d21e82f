// The E2B control plane's decisions, pure and unit-tested (docs/e2b.md): a sandbox's egress
// policy, its lifetime after setTimeout and connect, the order, filters and pages of
// Sandbox.list, and the time window of getMetrics. control_plane.cc applies them to boxes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "box/box.h"
#include "e2b/model.h"

namespace hutch::e2b {

// ---- network ----

// The egress policy (hutch's policy text: a preset name or a JSON document, egress/policy.h) of
// a sandbox's network request. A request that asks for nothing, or only for internet access,
// gets `e2b_default` (hutchd --e2b-network-policy, allow-all unless the operator says
// otherwise); allow_internet_access false alone is the `none` preset; allowOut names the
// domains allowed and denyOut the domains denied, over everything else unless
// allow_internet_access is false or denyOut has 0.0.0.0/0 (then over nothing). An IP address or
// range (other than 0.0.0.0/0, ::/0) is kInvalidArgument: hutch's egress decides on names
// (docs/network.md), and a rule on addresses would not hold for a name that resolves into it.
Result<std::string> egressPolicy(const NetworkRequest& network, std::string_view e2b_default);

// ---- lifetimes (unix seconds; 0: no lifetime) ----

// setTimeout(timeout): the lifetime ends `timeout` seconds from now; 0 ends it now.
int64_t timeoutExpiry(int64_t now, int64_t timeout_s);
// connect(timeout): a running sandbox's lifetime is only ever extended (one without a lifetime
// keeps none), a resumed one's ends `timeout` seconds from now.
int64_t connectExpiry(int64_t expires_at, int64_t now, int64_t timeout_s, bool resumed);
// What hutchd does when a sandbox's lifetime ends: pause it (autoPause), else kill it.
box::Expiry expiryAction(const box::Box& b);

// ---- Sandbox.list ----

// RFC 3339 ("2026-08-22T10:00:00Z", "2026-08-22T10:00:00.123+02:00") in unix nanoseconds.
Result<int64_t> parseRfc3339(std::string_view text);

// GET /v2/sandboxes' query: metadata (decoded by the caller), state=running,paused,
// template=, startedAfter= (RFC 3339), order=asc|desc (default desc: newest first), limit=,
// nextToken= (what X-Next-Token said).
struct ListQuery {
  std::map<std::string, std::string> metadata;
  std::vector<std::string> states;
  std::string template_id;
  std::optional<int64_t> started_after_ns;
  bool newest_first = true;
  size_t limit = 1000;
  // From nextToken: the page starts after this box (its createdNanos and id).
  std::optional<std::pair<int64_t, std::string>> after;
};
Result<ListQuery> parseListQuery(const std::map<std::string, std::string, std::less<>>& query,
                                 std::map<std::string, std::string> metadata);

// When a box was created, in unix nanoseconds: the façade's own record when it made the box in
// that second, else the second.
int64_t createdNanos(const box::Box& b);

// One page of the boxes that match `query`, in creation order (ties by id), and the token of
// the next page ("" on the last).
struct ListPage {
  std::vector<box::Box> items;
  std::string next_token;
};
ListPage listPage(std::vector<box::Box> boxes, const ListQuery& query);

// ---- getMetrics ----

// hutch has one sample, the usage now. For a window [start, end] (unix seconds; either may be
// absent) of a sandbox that started at `started`: the sample's time (now, pulled back to `end`
// when the window ends earlier), or nullopt when the window misses the sandbox's life.
std::optional<int64_t> metricTime(int64_t now, int64_t started, std::optional<int64_t> start,
                                  std::optional<int64_t> end);

}  // namespace hutch::e2b

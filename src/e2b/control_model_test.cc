#include "e2b/control_model.h"

#include <gtest/gtest.h>

namespace hutch::e2b {
namespace {

using nlohmann::json;

json policyJson(const NetworkRequest& network, std::string_view e2b_default = "allow-all") {
  auto text = egressPolicy(network, e2b_default);
  EXPECT_TRUE(text) << text.error().describe();
  return text ? json::parse(*text, nullptr, false) : json();
}

TEST(NetworkTest, ASandboxThatAsksForNothingGetsTheE2bDefault) {
  EXPECT_EQ(egressPolicy({}, "allow-all").value(), "allow-all");
  EXPECT_EQ(egressPolicy({.allow_internet_access = true}, "allow-all").value(), "allow-all");
  // The operator's choice (hutchd --e2b-network-policy).
  EXPECT_EQ(egressPolicy({}, "none").value(), "none");
  EXPECT_EQ(egressPolicy({.allow_internet_access = false}, "allow-all").value(), "none");
}

TEST(NetworkTest, DomainsAllowedAndDeniedOverEverythingElseOrNothing) {
  auto open = policyJson({.deny_out = {"evil.example.com"}});
  EXPECT_EQ(open["allow"], json::parse(R"([{"domain":"*"}])"));
  EXPECT_EQ(open["deny"], json::parse(R"([{"domain":"evil.example.com"}])"));
  auto only = policyJson({.allow_out = {"api.example.com"}, .deny_out = {"0.0.0.0/0"}});
  EXPECT_EQ(only["allow"], json::parse(R"([{"domain":"api.example.com"}])"));
  auto offline = policyJson({.allow_out = {"api.example.com"}, .allow_internet_access = false});
  EXPECT_EQ(offline["allow"], json::parse(R"([{"domain":"api.example.com"}])"));
}

TEST(NetworkTest, AddressRulesAreRefusedSayingWhy) {
  for (const char* address : {"1.1.1.1", "8.8.8.8/32", "10.0.0.0/8", "2001:db8::/32"}) {
    auto allow = egressPolicy({.allow_out = {address}}, "allow-all");
    ASSERT_FALSE(allow) << address;
    EXPECT_EQ(allow.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(allow.error().message().find("names"), std::string::npos);
    auto deny = egressPolicy({.deny_out = {address}}, "allow-all");
    ASSERT_FALSE(deny) << address;
    EXPECT_NE(deny.error().message().find(address), std::string::npos);
  }
  EXPECT_TRUE(egressPolicy({.deny_out = {"::/0"}}, "allow-all"));
}

TEST(LifetimeTest, SetTimeoutZeroEndsNow) {
  EXPECT_EQ(timeoutExpiry(1000, 60), 1060);
  EXPECT_EQ(timeoutExpiry(1000, 0), 1000);
}

TEST(LifetimeTest, ConnectOnlyExtendsARunningSandbox) {
  EXPECT_EQ(connectExpiry(1300, 1000, 10, false), 1300);  // shorter: kept
  EXPECT_EQ(connectExpiry(1300, 1000, 600, false), 1600);
  EXPECT_EQ(connectExpiry(0, 1000, 10, false), 0);       // no lifetime stays none
  EXPECT_EQ(connectExpiry(1300, 1000, 10, true), 1010);  // resumed: a new lifetime
  EXPECT_EQ(connectExpiry(1300, 1000, 0, true), 1300);
}

TEST(LifetimeTest, AutoPauseIsRememberedAfterAPause) {
  box::Box b;
  EXPECT_EQ(expiryAction(b), box::Expiry::kRemove);
  b.metadata[std::string(kAutoPauseMetadataKey)] = "true";
  EXPECT_EQ(expiryAction(b), box::Expiry::kSuspend);
  b.on_expiry = box::Expiry::kStop;
  EXPECT_EQ(expiryAction(b), box::Expiry::kStop);
}

TEST(ListTest, Rfc3339AsTheSdksSendIt) {
  EXPECT_EQ(parseRfc3339("1970-01-01T00:00:01Z").value(), 1000000000);
  EXPECT_EQ(parseRfc3339("2026-08-22T10:00:00.123Z").value(), 1787392800123000000);
  EXPECT_EQ(parseRfc3339("2026-08-22T12:00:00.123456+02:00").value(), 1787392800123456000);
  EXPECT_EQ(parseRfc3339("2026-08-22T12:00:00 02:00").value(), 1787392800000000000);  // '+' lost
  EXPECT_EQ(parseRfc3339("2026-08-22T07:30:00-02:30").value(), 1787392800000000000);
  for (const char* bad : {"", "yesterday", "2026-08-22", "2026-13-01T00:00:00Z",
                          "2026-08-22T10:00:00", "2026-08-22T10:00:00.Z"}) {
    EXPECT_FALSE(parseRfc3339(bad)) << bad;
  }
}

box::Box boxAt(std::string id, int64_t created_s, int64_t nanos, std::string tmpl = "base") {
  box::Box b;
  b.id = std::move(id);
  b.created_at = created_s;
  b.state = box::BoxState::kRunning;
  b.config.template_name = "base";
  b.metadata[std::string(kTemplateMetadataKey)] = std::move(tmpl);
  if (nanos >= 0) {
    b.metadata[std::string(kCreatedMetadataKey)] = std::to_string(created_s * 1000000000 + nanos);
  }
  return b;
}

std::vector<std::string> ids(const ListPage& page) {
  std::vector<std::string> out;
  for (const auto& b : page.items) out.push_back(b.id);
  return out;
}

TEST(ListTest, NewestFirstToTheNanosecondThenById) {
  // Made in this order, two in one second, ids in the opposite order.
  std::vector<box::Box> boxes{boxAt("ffff", 100, 5), boxAt("eeee", 100, 9), boxAt("dddd", 101, -1),
                              boxAt("cccc", 101, -1)};
  ListQuery newest;
  EXPECT_EQ(ids(listPage(boxes, newest)),
            (std::vector<std::string>{"dddd", "cccc", "eeee", "ffff"}));
  ListQuery oldest;
  oldest.newest_first = false;
  EXPECT_EQ(ids(listPage(boxes, oldest)),
            (std::vector<std::string>{"ffff", "eeee", "cccc", "dddd"}));
  // A record of another second (a fork copies its parent's) counts as the box's own second.
  box::Box fork = boxAt("aaaa", 102, -1);
  fork.metadata[std::string(kCreatedMetadataKey)] = "100000000009";
  EXPECT_EQ(createdNanos(fork), 102000000000);
}

TEST(ListTest, PagesFollowTheirTokenWhileSandboxesComeAndGo) {
  std::vector<box::Box> boxes{boxAt("a1", 100, 1), boxAt("a2", 100, 2), boxAt("a3", 100, 3)};
  ListQuery q;
  q.limit = 1;
  ListPage first = listPage(boxes, q);
  EXPECT_EQ(ids(first), std::vector<std::string>{"a3"});
  ASSERT_FALSE(first.next_token.empty());
  std::map<std::string, std::string, std::less<>> raw{{"limit", "1"},
                                                      {"nextToken", first.next_token}};
  auto next = parseListQuery(raw, {});
  ASSERT_TRUE(next) << next.error().describe();
  // a3 removed and a4 made meanwhile: the next page goes on after a3.
  boxes.erase(boxes.begin() + 2);
  boxes.push_back(boxAt("a4", 101, 0));
  ListPage second = listPage(boxes, *next);
  EXPECT_EQ(ids(second), std::vector<std::string>{"a2"});
  raw["nextToken"] = second.next_token;
  ListPage last = listPage(boxes, parseListQuery(raw, {}).value());
  EXPECT_EQ(ids(last), std::vector<std::string>{"a1"});
  EXPECT_TRUE(last.next_token.empty());
}

TEST(ListTest, FiltersByStateTemplateMetadataAndStart) {
  box::Box paused = boxAt("p", 100, 0, "code");
  paused.state = box::BoxState::kSuspended;
  paused.metadata["run"] = "7";
  std::vector<box::Box> boxes{paused, boxAt("r", 200, 500000000)};
  auto query = [&](std::map<std::string, std::string, std::less<>> raw,
                   std::map<std::string, std::string> metadata = {}) {
    auto q = parseListQuery(raw, std::move(metadata));
    EXPECT_TRUE(q) << q.error().describe();
    return ids(listPage(boxes, *q));
  };
  EXPECT_EQ(query({{"state", "paused"}}), std::vector<std::string>{"p"});
  EXPECT_EQ(query({{"state", "running,paused"}}), (std::vector<std::string>{"r", "p"}));
  EXPECT_EQ(query({{"template", "code"}}), std::vector<std::string>{"p"});
  EXPECT_EQ(query({{"template", "base"}}), (std::vector<std::string>{"r", "p"}));  // hutch's name
  EXPECT_EQ(query({{"template", "unknown"}}), std::vector<std::string>{});
  EXPECT_EQ(query({}, {{"run", "7"}}), std::vector<std::string>{"p"});
  // startedAfter: at or after; a startedAt passed back (whole seconds) keeps its sandbox.
  EXPECT_EQ(query({{"startedAfter", "1970-01-01T00:03:20Z"}}), std::vector<std::string>{"r"});
  EXPECT_EQ(query({{"startedAfter", "1970-01-01T00:03:21Z"}}), std::vector<std::string>{});
  // Past 2262 nanoseconds overflow 64 bits: such a time is later than every sandbox.
  EXPECT_EQ(query({{"startedAfter", "2999-01-01T00:00:00Z"}}), std::vector<std::string>{});
  EXPECT_FALSE(parseListQuery({{"order", "up"}}, {}));
  EXPECT_FALSE(parseListQuery({{"limit", "0"}}, {}));
  EXPECT_FALSE(parseListQuery({{"nextToken", "0123456789ab"}}, {}));
  EXPECT_FALSE(parseListQuery({{"startedAfter", "today"}}, {}));
}

TEST(MetricsTest, TheOneSampleIsStampedInsideTheWindow) {
  // Started at 100, now 200.
  EXPECT_EQ(metricTime(200, 100, std::nullopt, std::nullopt), 200);
  EXPECT_EQ(metricTime(200, 100, 150, 199), 199);  // the window ended a second ago
  EXPECT_EQ(metricTime(200, 100, 150, 300), 200);
  EXPECT_EQ(metricTime(200, 100, std::nullopt, 100), 100);
  EXPECT_FALSE(metricTime(200, 100, 10, 50));    // before the sandbox existed
  EXPECT_FALSE(metricTime(200, 100, 250, 300));  // after now
  EXPECT_FALSE(metricTime(200, 100, 190, 180));  // backwards
}

}  // namespace
}  // namespace hutch::e2b

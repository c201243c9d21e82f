// The E2B façade end to end, below the SDKs (tests/e2b runs E2B's own SDKs): what the create
// body maps onto (the box's egress policy, environment, template, lifetime), the sandbox access
// tokens, and the errors E2B's clients read, checked with curl against a real hutchd and with
// hutch's own CLI on the box it made.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "harness.h"

namespace hutch::e2e {
namespace {

using nlohmann::json;

class E2bTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon({"--listen-http", "127.0.0.1:0", "--e2b-template", "my-e2b-name=base"});
    url_ = new std::string(endpointsOf(*daemon_).http);
    key_ = new std::string(makeKey(*daemon_, {"agent"}));
  }
  static void TearDownTestSuite() {
    delete key_;
    delete url_;
    delete daemon_;
    daemon_ = nullptr;
  }

  struct Reply {
    int status = 0;
    json body;
    std::string raw;
  };
  // curl with the given arguments against path; the status and the body (JSON when it is).
  static Reply request(const std::string& method, const std::string& path,
                       const std::string& args) {
    auto r = shell("curl -sS -X " + method + " -w '\\n%{http_code}' " + args + " " +
                   quoted(*url_ + path));
    Reply out;
    auto nl = r.out.rfind('\n');
    if (nl == std::string::npos) return out;
    out.status = std::atoi(r.out.c_str() + nl + 1);
    out.raw = r.out.substr(0, nl);
    out.body = json::parse(out.raw, nullptr, false);
    return out;
  }
  static Reply control(const std::string& method, const std::string& path,
                       const std::string& body = "") {
    std::string args = "-H " + quoted("X-API-Key: " + *key_);
    if (!body.empty()) args += " -H 'Content-Type: application/json' --data " + quoted(body);
    return request(method, path, args);
  }
  static Reply envd(const std::string& path, const std::string& id, const std::string& token,
                    const std::string& body) {
    return request("POST", path,
                   "-H " + quoted("E2b-Sandbox-Id: " + id) + " -H " +
                       quoted("X-Access-Token: " + token) +
                       " -H 'Content-Type: application/json' --data " + quoted(body));
  }
  // The box's egress policy as hutch shows it ({"allow": [...], "deny": [...]}).
  static json policyOf(const std::string& id) {
    auto r = daemon_->hutch({"--json", "policy", "show", id});
    auto j = json::parse(r.out, nullptr, false);
    return j.is_object() ? j.value("policy", json()) : json();
  }

  static Daemon* daemon_;
  static std::string* url_;
  static std::string* key_;
};
Daemon* E2bTest::daemon_ = nullptr;
std::string* E2bTest::url_ = nullptr;
std::string* E2bTest::key_ = nullptr;

TEST_F(E2bTest, TheCreateBodyBecomesTheBoxsTemplatePolicyEnvironmentAndLifetime) {
  auto made = control("POST", "/v2/sandboxes",
                      R"({"templateID":"my-e2b-name","timeout":600,"metadata":{"run":"7"},)"
                      R"("envVars":{"GREETING":"hi there"},)"
                      R"("network":{"allowOut":["api.example.com"],"denyOut":["0.0.0.0/0"]}})");
  ASSERT_EQ(made.status, 201) << made.raw;
  const std::string id = made.body.value("sandboxID", "");
  EXPECT_EQ(made.body["templateID"], "my-e2b-name");
  EXPECT_EQ(made.body["envdVersion"], "0.5.7");
  ASSERT_EQ(made.body.value("envdAccessToken", "").size(), 64u) << made.raw;
  // hutch's own view of the box: the mapped template, its owner, its policy.
  auto box = daemon_->inspect(id);
  ASSERT_TRUE(box.is_object()) << id;
  EXPECT_EQ(box["template"], "base") << box.dump();
  EXPECT_EQ(box["owner"], "agent") << box.dump();
  // allowOut is allowed; denyOut 0.0.0.0/0 means nothing else is (no "*" rule).
  auto policy = policyOf(id);
  ASSERT_TRUE(policy.is_object() && policy["allow"].is_array()) << policy.dump();
  std::vector<std::string> allowed;
  for (const auto& rule : policy["allow"]) allowed.push_back(rule.value("domain", ""));
  EXPECT_EQ(allowed, std::vector<std::string>{"api.example.com"}) << policy.dump();
  // The environment reaches every command, through hutch's own exec too.
  auto env = daemon_->hutch({"exec", id, "--", "sh", "-c", "echo \"$GREETING\""});
  EXPECT_EQ(env.out, "hi there\n") << env.err;
  // The lifetime: endAt is ten minutes after start, and setTimeout moves it.
  auto detail = control("GET", "/sandboxes/" + id);
  ASSERT_EQ(detail.status, 200) << detail.raw;
  EXPECT_EQ(detail.body["metadata"], json::parse(R"({"run":"7"})"));
  EXPECT_NE(detail.body["startedAt"], detail.body["endAt"]);
  EXPECT_EQ(control("POST", "/sandboxes/" + id + "/timeout", R"({"timeout":3600})").status, 204);
  auto later = control("GET", "/sandboxes/" + id);
  EXPECT_GT(later.body.value("endAt", ""), detail.body.value("endAt", "")) << later.raw;
  EXPECT_EQ(control("DELETE", "/sandboxes/" + id).status, 204);
  EXPECT_EQ(control("DELETE", "/sandboxes/" + id).status, 404);
}

TEST_F(E2bTest, ASandboxPastItsTimeoutIsRemovedByHutchd) {
  auto made = control("POST", "/sandboxes", R"({"templateID":"base","timeout":2})");
  ASSERT_EQ(made.status, 201) << made.raw;
  const std::string id = made.body["sandboxID"];
  // hutchd checks lifetimes every second; allow a minute for a loaded host.
  bool gone = false;
  for (int i = 0; i < 60 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    gone = control("GET", "/sandboxes/" + id).status == 404;
  }
  EXPECT_TRUE(gone) << "the sandbox outlived its 2 s timeout by a minute";
  EXPECT_NE(daemon_->hutch({"inspect", id}).exit_code, 0) << "the box is gone too";
}

TEST_F(E2bTest, EnvdRequestsNeedTheSandboxsOwnToken) {
  auto a = control("POST", "/sandboxes", R"({"templateID":"base","timeout":600})");
  auto b = control("POST", "/sandboxes", R"({"templateID":"base","timeout":600})");
  ASSERT_EQ(a.status, 201) << a.raw;
  ASSERT_EQ(b.status, 201) << b.raw;
  const std::string a_id = a.body["sandboxID"];
  const std::string b_id = b.body["sandboxID"];
  const std::string a_token = a.body["envdAccessToken"];
  const std::string b_token = b.body["envdAccessToken"];
  EXPECT_NE(a_token, b_token);
  const std::string stat = R"({"path":"/home/user"})";
  auto ok = envd("/filesystem.Filesystem/Stat", a_id, a_token, stat);
  EXPECT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body["entry"]["type"], "FILE_TYPE_DIRECTORY") << ok.raw;
  EXPECT_EQ(ok.body["entry"]["owner"], "user") << ok.raw;
  // Another sandbox's token, no token, a made-up one: 401, in Connect's error format.
  for (const std::string& token : {b_token, std::string(), std::string(64, 'a')}) {
    auto refused = envd("/filesystem.Filesystem/Stat", a_id, token, stat);
    EXPECT_EQ(refused.status, 401) << refused.raw;
    EXPECT_EQ(refused.body["code"], "unauthenticated") << refused.raw;
  }
  // A sandbox that does not exist is "not running" to the SDKs: 502.
  EXPECT_EQ(envd("/filesystem.Filesystem/Stat", "0123456789ab", a_token, stat).status, 502);
  // A paused (stopped) sandbox too; pausing it again is 409 (the SDK's "already paused").
  EXPECT_EQ(control("POST", "/sandboxes/" + b_id + "/pause", "{}").status, 204);
  EXPECT_EQ(control("POST", "/sandboxes/" + b_id + "/pause", "{}").status, 409);
  auto paused = envd("/filesystem.Filesystem/Stat", b_id, b_token, stat);
  EXPECT_EQ(paused.status, 502) << paused.raw;
  // connect resumes it (201: it was not running) with the same token.
  auto resumed = control("POST", "/sandboxes/" + b_id + "/connect", R"({"timeout":600})");
  EXPECT_EQ(resumed.status, 201) << resumed.raw;
  EXPECT_EQ(resumed.body["envdAccessToken"], b_token);
  EXPECT_EQ(envd("/filesystem.Filesystem/Stat", b_id, b_token, stat).status, 200);
  EXPECT_EQ(control("POST", "/sandboxes/" + b_id + "/connect", "{}").status, 200);
  EXPECT_EQ(control("DELETE", "/sandboxes/" + a_id).status, 204);
  EXPECT_EQ(control("DELETE", "/sandboxes/" + b_id).status, 204);
}

TEST_F(E2bTest, ControlPlaneErrorsAreE2bsAndNeedAKey) {
  auto none = request("GET", "/v2/sandboxes", "");
  EXPECT_EQ(none.status, 401) << none.raw;
  EXPECT_EQ(none.body["code"], 401) << none.raw;  // E2B's {"code": <status>, "message"}
  auto unknown = control("GET", "/sandboxes/0123456789ab");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body["code"], 404);
  auto bad = control("POST", "/sandboxes", R"({"timeout":"soon"})");
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_NE(bad.body.value("message", "").find("timeout"), std::string::npos) << bad.raw;
  auto no_template = control("POST", "/sandboxes", R"({"templateID":"no-such-template"})");
  EXPECT_EQ(no_template.status, 404) << no_template.raw;
  auto ranges = control("POST", "/sandboxes", R"({"network":{"allowOut":["10.0.0.0/8"]}})");
  EXPECT_EQ(ranges.status, 400) << ranges.raw;
  auto ls = json::parse(daemon_->hutch({"--json", "ls"}).out, nullptr, false);
  EXPECT_TRUE(ls.is_array() && ls.empty()) << "refused creates made nothing: " << ls.dump();
}

TEST_F(E2bTest, SnapshotsSavedWhileOthersAreRemovedKeepTheirFiles) {
  // Issue 38.1: removing a snapshot sweeps snapshot directories that have no record, and a save
  // in flight has its directory before its record. tests/e2e/snapshot_race.py saves two
  // sandboxes in a loop while a third thread removes every snapshot made; each saved one must
  // keep its files and the last must restore. HUTCH_SNAPSHOT_RACE_SECONDS runs it longer.
  auto a = control("POST", "/sandboxes", R"({"templateID":"base","timeout":900})");
  auto b = control("POST", "/sandboxes", R"({"templateID":"base","timeout":900})");
  ASSERT_EQ(a.status, 201) << a.raw;
  ASSERT_EQ(b.status, 201) << b.raw;
  const char* seconds = std::getenv("HUTCH_SNAPSHOT_RACE_SECONDS");
  auto r =
      shell("python3 " + quoted(std::string(HUTCH_E2E_SOURCE_DIR) + "/snapshot_race.py") + " " +
            e2e::quoted(*url_) + " " + e2e::quoted(*key_) + " " +
            quoted(daemon_->stateDir().string()) + " " + quoted(a.body["sandboxID"]) + " " +
            quoted(b.body["sandboxID"]) + " --seconds " + (seconds != nullptr ? seconds : "40"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto summary = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(summary.is_object()) << r.out << r.err;
  EXPECT_GT(summary.value("saved", 0), 10) << r.out;
  EXPECT_EQ(summary["lost"], json::array()) << r.out;
  EXPECT_EQ(summary["restore_status"], 201) << r.out;
  EXPECT_EQ(control("DELETE", "/sandboxes/" + a.body["sandboxID"].get<std::string>()).status, 204);
  EXPECT_EQ(control("DELETE", "/sandboxes/" + b.body["sandboxID"].get<std::string>()).status, 204);
}

// ---- issue 38, item 3: E2B's semantics where hutch has the feature ----

// The box's egress allow-list as domain names.
std::vector<std::string> allowedDomains(const json& policy) {
  std::vector<std::string> out;
  if (policy.is_object() && policy["allow"].is_array()) {
    for (const auto& rule : policy["allow"]) out.push_back(rule.value("domain", ""));
  }
  return out;
}

std::vector<std::string> sandboxIds(const json& list) {
  std::vector<std::string> out;
  if (list.is_array()) {
    for (const auto& s : list) out.push_back(s.value("sandboxID", ""));
  }
  return out;
}

TEST_F(E2bTest, SandboxesHaveTheInternetAsE2bsDoAndUpdateNetworkReplacesTheRules) {
  // Nothing said, or allow_internet_access true: hutchd's --e2b-network-policy (allow-all).
  auto plain = control("POST", "/sandboxes", R"({"templateID":"base","timeout":600})");
  auto open = control("POST", "/v2/sandboxes",
                      R"({"templateID":"base","timeout":600,"allow_internet_access":true})");
  ASSERT_EQ(plain.status, 201) << plain.raw;
  ASSERT_EQ(open.status, 201) << open.raw;
  const std::string id = plain.body["sandboxID"];
  const std::string open_id = open.body["sandboxID"];
  EXPECT_EQ(allowedDomains(policyOf(id)), std::vector<std::string>{"*"}) << policyOf(id).dump();
  EXPECT_EQ(allowedDomains(policyOf(open_id)), std::vector<std::string>{"*"});
  // The box still holds no key or secret: its environment has no E2B or hutch credential.
  auto env = daemon_->hutch({"exec", id, "--", "sh", "-c", "env"});
  EXPECT_EQ(env.out.find(*key_), std::string::npos);
  EXPECT_EQ(env.out.find(plain.body.value("envdAccessToken", "-")), std::string::npos);
  // updateNetwork: the rules replaced, live.
  auto updated = control("PUT", "/sandboxes/" + id + "/network",
                         R"({"allowOut":["api.example.com"],"denyOut":["0.0.0.0/0"]})");
  EXPECT_EQ(updated.status, 204) << updated.raw;
  EXPECT_EQ(allowedDomains(policyOf(id)), std::vector<std::string>{"api.example.com"});
  auto offline =
      control("PUT", "/sandboxes/" + id + "/network", R"({"allow_internet_access":false})");
  EXPECT_EQ(offline.status, 204) << offline.raw;
  EXPECT_EQ(allowedDomains(policyOf(id)), std::vector<std::string>{});
  // Addresses cannot be expressed by hutch's egress (it decides on names): 400, saying so.
  auto address = control("PUT", "/sandboxes/" + id + "/network", R"({"allowOut":["1.1.1.1"]})");
  EXPECT_EQ(address.status, 400) << address.raw;
  EXPECT_NE(address.body.value("message", "").find("names"), std::string::npos) << address.raw;
  EXPECT_EQ(control("PUT", "/sandboxes/0123456789ab/network", "{}").status, 404);
  EXPECT_EQ(control("DELETE", "/sandboxes/" + id).status, 204);
  EXPECT_EQ(control("DELETE", "/sandboxes/" + open_id).status, 204);
}

TEST_F(E2bTest, ListIsNewestFirstWithFiltersAndStablePages) {
  const std::string run = "list-" + std::to_string(::getpid());
  const std::string body =
      R"({"templateID":"my-e2b-name","timeout":600,"metadata":{"run":")" + run + R"("}})";
  auto first = control("POST", "/sandboxes", body);
  auto second = control("POST", "/sandboxes", body);  // most likely in the same second
  ASSERT_EQ(first.status, 201) << first.raw;
  ASSERT_EQ(second.status, 201) << second.raw;
  const std::string a = first.body["sandboxID"];
  const std::string b = second.body["sandboxID"];
  const std::string filter = "metadata=run%3D" + run;
  EXPECT_EQ(sandboxIds(control("GET", "/v2/sandboxes?" + filter).body),
            (std::vector<std::string>{b, a}));
  EXPECT_EQ(sandboxIds(control("GET", "/v2/sandboxes?order=asc&" + filter).body),
            (std::vector<std::string>{a, b}));
  EXPECT_EQ(sandboxIds(control("GET", "/v2/sandboxes?template=my-e2b-name&" + filter).body),
            (std::vector<std::string>{b, a}));
  EXPECT_EQ(sandboxIds(control("GET", "/v2/sandboxes?template=unknown&" + filter).body),
            std::vector<std::string>{});
  // startedAfter: a sandbox's own startedAt keeps it; a later time does not.
  const std::string started = control("GET", "/sandboxes/" + a).body.value("startedAt", "");
  ASSERT_FALSE(started.empty());
  auto after = control("GET", "/v2/sandboxes?startedAfter=" + started + "&" + filter);
  EXPECT_EQ(after.body.size(), 2u) << after.raw;
  auto later = control("GET", "/v2/sandboxes?startedAfter=2999-01-01T00:00:00Z&" + filter);
  EXPECT_EQ(later.body, json::array()) << later.raw;
  // Pages of one: the newest, then (by X-Next-Token) the other, then no token.
  auto page = [&](const std::string& token) {
    auto r =
        shell("curl -sS -w '\\n%header{x-next-token}' -H " + quoted("X-API-Key: " + *key_) + " " +
              quoted(*url_ + "/v2/sandboxes?limit=1&" + filter +
                     (token.empty() ? "" : "&nextToken=" + token)));
    auto nl = r.out.rfind('\n');
    return std::make_pair(json::parse(r.out.substr(0, nl), nullptr, false),
                          nl == std::string::npos ? std::string() : r.out.substr(nl + 1));
  };
  auto [one, token] = page("");
  EXPECT_EQ(sandboxIds(one), std::vector<std::string>{b});
  ASSERT_FALSE(token.empty());
  auto [two, end] = page(token);
  EXPECT_EQ(sandboxIds(two), std::vector<std::string>{a});
  EXPECT_EQ(end, "");
  EXPECT_EQ(control("GET", "/v2/sandboxes?order=sideways").status, 400);

  // getMetrics: memCache is there (the Python SDK needs it); a window before the sandbox
  // existed has no samples, one around now has the sample.
  auto metrics = control("GET", "/sandboxes/" + a + "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.raw;
  ASSERT_EQ(metrics.body.size(), 1u) << metrics.raw;
  for (const char* key : {"timestamp", "timestampUnix", "cpuCount", "cpuUsedPct", "memUsed",
                          "memTotal", "memCache", "diskUsed", "diskTotal"}) {
    EXPECT_TRUE(metrics.body[0].contains(key)) << key << " " << metrics.raw;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto before = control("GET", "/sandboxes/" + a + "/metrics?start=" + std::to_string(now - 7200) +
                                   "&end=" + std::to_string(now - 3600));
  EXPECT_EQ(before.body, json::array()) << before.raw;
  auto around = control("GET", "/sandboxes/" + a + "/metrics?start=" + std::to_string(now - 60) +
                                   "&end=" + std::to_string(now));
  ASSERT_EQ(around.body.size(), 1u) << around.raw;
  EXPECT_LE(around.body[0].value("timestampUnix", int64_t{0}), now);

  // connect never shortens a running sandbox's lifetime; a longer timeout extends it.
  const std::string end_at = control("GET", "/sandboxes/" + a).body.value("endAt", "");
  EXPECT_EQ(control("POST", "/sandboxes/" + a + "/connect", R"({"timeout":10})").status, 200);
  EXPECT_EQ(control("GET", "/sandboxes/" + a).body.value("endAt", ""), end_at);
  EXPECT_EQ(control("POST", "/sandboxes/" + a + "/connect", R"({"timeout":3600})").status, 200);
  EXPECT_GT(control("GET", "/sandboxes/" + a).body.value("endAt", ""), end_at);

  // setTimeout(0) ends the sandbox now (killed within hutchd's next check).
  EXPECT_EQ(control("POST", "/sandboxes/" + b + "/timeout", R"({"timeout":0})").status, 204);
  bool gone = false;
  for (int i = 0; i < 30 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    gone = control("GET", "/sandboxes/" + b).status == 404;
  }
  EXPECT_TRUE(gone) << "setTimeout(0) left the sandbox running";
  EXPECT_EQ(control("DELETE", "/sandboxes/" + a).status, 204);
}

TEST_F(E2bTest, FilesFollowEnvdsSemantics) {
  auto made = control("POST", "/sandboxes", R"({"templateID":"base","timeout":600})");
  ASSERT_EQ(made.status, 201) << made.raw;
  const std::string id = made.body["sandboxID"];
  const std::string token = made.body["envdAccessToken"];
  auto inBox = [&](const std::string& script) {
    return daemon_->hutch({"exec", id, "--user", "root", "--", "sh", "-c", script});
  };
  const std::string fs = "/filesystem.Filesystem/";
  // A directory's mode is its permission bits (envd: 493), a symlink's target absolute.
  ASSERT_EQ(inBox("mkdir -p /home/user/d && echo x > /home/user/f.txt && "
                  "ln -s f.txt /home/user/link && chown -R user:user /home/user")
                .exit_code,
            0);
  auto dir = envd(fs + "Stat", id, token, R"({"path":"/home/user/d"})");
  EXPECT_EQ(dir.body["entry"]["mode"], 493) << dir.raw;
  auto link = envd(fs + "Stat", id, token, R"({"path":"link"})");
  EXPECT_EQ(link.body["entry"]["symlinkTarget"], "/home/user/f.txt") << link.raw;
  // Removing what is not there succeeds, as envd's os.RemoveAll.
  auto missing = envd(fs + "Remove", id, token, R"({"path":"/home/user/no-such-file"})");
  EXPECT_EQ(missing.status, 200) << missing.raw;

  // A relative cwd is taken from the user's home.
  const std::string start_json =
      R"({"process":{"cmd":"/bin/pwd","args":[],"envs":{},"cwd":"d"},"stdin":false})";
  std::string framed(5, '\0');
  framed[4] = static_cast<char>(start_json.size());
  framed += start_json;
  const std::string body_file = daemon_->stateDir().string() + "/start.bin";
  { std::ofstream(body_file, std::ios::binary) << framed; }
  auto started = shell("curl -sS -X POST -H " + quoted("E2b-Sandbox-Id: " + id) + " -H " +
                       quoted("X-Access-Token: " + token) +
                       " -H 'Content-Type: application/connect+json' --data-binary @" +
                       quoted(body_file) + " " + quoted(*url_ + "/process.Process/Start"));
  // "/home/user/d\n" in base64, in a data event; no error at the end.
  EXPECT_NE(started.out.find("L2hvbWUvdXNlci9kCg=="), std::string::npos) << started.out;
  EXPECT_EQ(started.out.find("\"error\""), std::string::npos) << started.out;

  // Several files as the default user, one in a directory that does not exist under / (the
  // user may not make it): made, and given to the user, as envd does.
  const std::string local = daemon_->stateDir().string() + "/upload.txt";
  { std::ofstream(local) << "multi"; }
  auto uploaded = shell("curl -sS -w '\\n%{http_code}' -H " + quoted("E2b-Sandbox-Id: " + id) +
                        " -H " + quoted("X-Access-Token: " + token) + " -F " +
                        quoted("file=@" + local + ";filename=/e2b-new/0/multi0.txt") + " -F " +
                        quoted("file=@" + local + ";filename=/home/user/multi1.txt") + " " +
                        quoted(*url_ + "/files"));
  EXPECT_NE(uploaded.out.find("\n200"), std::string::npos) << uploaded.out << uploaded.err;
  auto owners = inBox(
      "stat -c '%U %G %a' /e2b-new /e2b-new/0 /e2b-new/0/multi0.txt; "
      "cat /home/user/multi1.txt");
  EXPECT_EQ(owners.out, "user user 755\nuser user 755\nuser user 644\nmulti") << owners.err;
  // A directory that exists keeps its permissions: /root is still refused to the user.
  auto refused =
      shell("curl -sS -o /dev/null -w '%{http_code}' -H " + quoted("E2b-Sandbox-Id: " + id) +
            " -H " + quoted("X-Access-Token: " + token) + " -F " +
            quoted("file=@" + local + ";filename=/root/x.txt") + " " + quoted(*url_ + "/files"));
  EXPECT_EQ(refused.out, "403") << refused.err;

  // gzip: true: the file is stored inflated.
  const std::string gz = daemon_->stateDir().string() + "/gz.txt";
  { std::ofstream(gz) << "Streamed gzipped octet-stream upload. "; }
  ASSERT_EQ(shell("gzip -kf " + quoted(gz)).exit_code, 0);
  auto zipped = shell("curl -sS -w '\\n%{http_code}' -H " + quoted("E2b-Sandbox-Id: " + id) +
                      " -H " + quoted("X-Access-Token: " + token) +
                      " -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip'"
                      " --data-binary @" +
                      quoted(gz + ".gz") + " " + quoted(*url_ + "/files?path=/home/user/gz.txt"));
  EXPECT_NE(zipped.out.find("\n200"), std::string::npos) << zipped.out;
  EXPECT_EQ(inBox("cat /home/user/gz.txt").out, "Streamed gzipped octet-stream upload. ");

  // A signed URL past its expiration: 401 in envd's words (E2B's SDK tests compare them).
  const int64_t past = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count() -
                       10;
  auto sig = shell("printf '%s' " + quoted("f.txt:read::" + token + ":" + std::to_string(past)) +
                   " | openssl dgst -sha256 -binary | base64 | tr -d '=\\n' | "
                   "sed 's/+/%2B/g; s#/#%2F#g'");
  ASSERT_EQ(sig.exit_code, 0) << sig.err;
  const std::string signed_path =
      "/files?path=f.txt&signature=v1_" + sig.out + "&signature_expiration=" + std::to_string(past);
  auto expired = request("GET", signed_path, "");
  EXPECT_EQ(expired.status, 401) << expired.raw;
  EXPECT_EQ(expired.body, json::parse(R"({"code":401,"message":"signature is already expired"})"))
      << expired.raw;
  auto forged = request("GET", "/files?path=f.txt&signature=v1_AAAA", "");
  EXPECT_EQ(forged.status, 401) << forged.raw;
  EXPECT_EQ(control("DELETE", "/sandboxes/" + id).status, 204);
}

}  // namespace
}  // namespace hutch::e2e

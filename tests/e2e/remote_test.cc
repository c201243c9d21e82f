// The remote API end to end: a real hutchd with a TLS listener and a plain loopback one, the
// real CLI over TCP (pinned, with a CA file, plain), keys, owners and quotas, and curl (someone
// else's HTTP client) for what the CLI does not show: statuses, headers, rate limits.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include "harness.h"

namespace hutch::e2e {
namespace {

class RemoteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon({"--listen", "127.0.0.1:0", "--listen-http", "127.0.0.1:0"});
    ends_ = new Endpoints(endpointsOf(*daemon_));
  }
  static void TearDownTestSuite() {
    delete ends_;
    delete daemon_;
    daemon_ = nullptr;
  }

  static RemoteCli pinned(const std::string& key) {
    return RemoteCli{{"--host", ends_->https, "--fingerprint", ends_->fingerprint}, key};
  }
  static RemoteCli withCa(const std::string& key) {
    return RemoteCli{{"--host", ends_->https, "--ca-cert", ends_->ca.string()}, key};
  }
  static RemoteCli plain(const std::string& key) { return RemoteCli{{"--host", ends_->http}, key}; }

  // curl against the TLS listener with the daemon's certificate; -w appends the status code.
  static CommandResult curl(const std::string& args) {
    return shell("curl -sS --cacert " + quoted(ends_->ca.string()) + " -w '\\n%{http_code}' " +
                 args);
  }
  static int statusOf(const CommandResult& r) {
    auto nl = r.out.rfind('\n');
    return nl == std::string::npos ? 0 : std::atoi(r.out.c_str() + nl + 1);
  }
  static nlohmann::json bodyOf(const CommandResult& r) {
    auto nl = r.out.rfind('\n');
    return nlohmann::json::parse(r.out.substr(0, nl), nullptr, false);
  }

  static Daemon* daemon_;
  static Endpoints* ends_;
};
Daemon* RemoteTest::daemon_ = nullptr;
Endpoints* RemoteTest::ends_ = nullptr;

TEST_F(RemoteTest, InfoAndDoctorReportTheListenersAndTheCertificateFingerprint) {
  ASSERT_TRUE(ends_->https.starts_with("https://127.0.0.1:")) << ends_->https;
  ASSERT_TRUE(ends_->http.starts_with("http://127.0.0.1:")) << ends_->http;
  ASSERT_EQ(ends_->fingerprint.size(), 95u) << ends_->fingerprint;
  // The fingerprint is the certificate's: openssl (not hutch) computes the same.
  auto openssl =
      shell("openssl x509 -in " + quoted(ends_->ca.string()) + " -noout -fingerprint -sha256");
  ASSERT_EQ(openssl.exit_code, 0) << openssl.err;
  EXPECT_NE(openssl.out.find(ends_->fingerprint), std::string::npos) << openssl.out;
  auto doctor = daemon_->hutch({"doctor"});
  EXPECT_NE(doctor.out.find(ends_->fingerprint), std::string::npos) << doctor.out;
}

TEST_F(RemoteTest, KeysAreShownOnceAndOnlyTheirHashesAreKept) {
  auto made = daemon_->hutch({"key", "create", "once"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::string key = made.out.substr(0, made.out.find('\n'));
  EXPECT_TRUE(std::regex_match(key, std::regex("e2b_[0-9a-f]{40}"))) << key;
  auto listed = daemon_->hutch({"--json", "key", "ls"});
  ASSERT_EQ(listed.exit_code, 0);
  EXPECT_EQ(listed.out.find(key), std::string::npos) << "ls never shows a key";
  EXPECT_NE(listed.out.find("\"once\""), std::string::npos);
  std::string db =
      readFile(daemon_->stateDir() / "hutch.db") + readFile(daemon_->stateDir() / "hutch.db-wal");
  EXPECT_EQ(db.find(key), std::string::npos) << "the database holds no key";
  auto again = daemon_->hutch({"key", "create", "once"});
  EXPECT_EQ(again.exit_code, 73) << again.err;
  EXPECT_EQ(daemon_->hutch({"key", "rm", "once"}).exit_code, 0);
  EXPECT_EQ(daemon_->hutch({"key", "rm", "once"}).exit_code, 66);
  EXPECT_EQ(daemon_->hutch({"key", "create", "bad name!"}).exit_code, 64);
}

TEST_F(RemoteTest, EveryTcpRequestNeedsAKeyAnswered401InJson) {
  auto none = curl(quoted(ends_->https + "/v1/boxes"));
  EXPECT_EQ(statusOf(none), 401) << none.out;
  EXPECT_EQ(bodyOf(none)["error"]["code"], "unauthenticated") << none.out;
  auto wrong = curl("-H 'Authorization: Bearer e2b_0000' " + quoted(ends_->https + "/v1/boxes"));
  EXPECT_EQ(statusOf(wrong), 401);
  std::string key = makeKey(*daemon_, {"curl-user"});
  auto bearer = curl("-H " + quoted("Authorization: Bearer " + key) + " " +
                     quoted(ends_->https + "/v1/boxes"));
  EXPECT_EQ(statusOf(bearer), 200) << bearer.out;
  auto x_api = curl("-H " + quoted("X-API-Key: " + key) + " " + quoted(ends_->https + "/v1/info"));
  EXPECT_EQ(statusOf(x_api), 200) << x_api.out;
  EXPECT_EQ(bodyOf(x_api)["caller"]["name"], "curl-user");
  EXPECT_FALSE(bodyOf(x_api).contains("state_dir")) << "a non-admin key is not told host paths";
  // The remote CLI without a key, and with a removed one.
  auto no_key = daemon_->hutchAs(pinned(""), {"ls"});
  EXPECT_EQ(no_key.exit_code, 64) << no_key.err;
  EXPECT_NE(no_key.err.find("HUTCH_API_KEY"), std::string::npos) << no_key.err;
  ASSERT_EQ(daemon_->hutch({"key", "rm", "curl-user"}).exit_code, 0);
  auto removed = daemon_->hutchAs(pinned(key), {"ls"});
  EXPECT_EQ(removed.exit_code, 77) << removed.err;
}

TEST_F(RemoteTest, TheSelfSignedCertificateNeedsACaFileOrAPin) {
  std::string key = makeKey(*daemon_, {"tls-user"});
  auto unverified = daemon_->hutchAs(RemoteCli{{"--host", ends_->https}, key}, {"ls"});
  EXPECT_EQ(unverified.exit_code, 69) << unverified.err;
  EXPECT_NE(unverified.err.find("--ca-cert"), std::string::npos) << unverified.err;
  EXPECT_EQ(daemon_->hutchAs(withCa(key), {"ls"}).exit_code, 0);
  EXPECT_EQ(daemon_->hutchAs(pinned(key), {"ls"}).exit_code, 0);
  std::string other(95, '0');
  for (size_t i = 2; i < other.size(); i += 3) other[i] = ':';
  auto mismatch =
      daemon_->hutchAs(RemoteCli{{"--host", ends_->https, "--fingerprint", other}, key}, {"ls"});
  EXPECT_EQ(mismatch.exit_code, 69);
  EXPECT_NE(mismatch.err.find("not the pinned"), std::string::npos) << mismatch.err;
  // Plain HTTP on the loopback listener.
  EXPECT_EQ(daemon_->hutchAs(plain(key), {"ls"}).exit_code, 0);
}

TEST_F(RemoteTest, TheRemoteCliDoesWhatTheLocalOneDoes) {
  std::string key = makeKey(*daemon_, {"cli-user"});
  RemoteCli remote = pinned(key);
  // Except share host folders: only the host's administrator may (docs/security.md).
  auto share = daemon_->hutchAs(remote, {"run", "-d", "--name", "sharer", "-v", "/srv:/work"});
  EXPECT_NE(share.exit_code, 0);
  EXPECT_NE(share.err.find("administrator"), std::string::npos) << share.err;
  auto run = daemon_->hutchAs(remote, {"run", "-d", "--name", "remote-box", "-e", "GREETING=hi"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto exec = daemon_->hutchAs(
      remote, {"exec", "remote-box", "--", "sh", "-c", "echo $GREETING; echo err >&2; exit 3"});
  EXPECT_EQ(exec.exit_code, 3);
  EXPECT_EQ(exec.out, "hi\n");
  EXPECT_EQ(exec.err, "err\n");
  // stdin through the TLS relay, byte for byte.
  std::string data(3u << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  auto cat = daemon_->hutchAs(remote, {"exec", "-i", "remote-box", "--", "sha256sum"}, data, true);
  ASSERT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_EQ(cat.out.substr(0, 64), sha256Hex(data));
  // cp both ways.
  auto local = daemon_->dir() / "cp-src.bin";
  { std::ofstream(local, std::ios::binary) << data; }
  ASSERT_EQ(
      daemon_->hutchAs(remote, {"cp", "-q", local.string(), "remote-box:/tmp/in.bin"}).exit_code,
      0);
  auto back = daemon_->dir() / "cp-back.bin";
  ASSERT_EQ(
      daemon_->hutchAs(remote, {"cp", "-q", "remote-box:/tmp/in.bin", back.string()}).exit_code, 0);
  EXPECT_EQ(sha256Hex(readFile(back)), sha256Hex(data));
  // The owner shows on the host's own listing, and inspect works remotely.
  auto ls = daemon_->hutch({"ls"});
  EXPECT_NE(ls.out.find("cli-user"), std::string::npos) << ls.out;
  auto inspect = daemon_->hutchAs(remote, {"inspect", "remote-box"});
  ASSERT_EQ(inspect.exit_code, 0);
  auto j = nlohmann::json::parse(inspect.out, nullptr, false);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j[0]["owner"], "cli-user");
  EXPECT_EQ(j[0]["env"]["GREETING"], "hi");
  // A terminal over TLS: a real PTY in the box.
  {
    PtyCli pty(*daemon_, {"shell", "remote-box"}, 30, 100, &remote);
    ASSERT_TRUE(pty.waitFor("$ ")) << pty.output();
    pty.write("stty size; echo $((6*7))\r");
    EXPECT_TRUE(pty.waitFor("30 100")) << pty.output();
    EXPECT_TRUE(pty.waitFor("42")) << pty.output();
    pty.write("exit 5\r");
    EXPECT_EQ(pty.wait(), 5);
  }
  EXPECT_EQ(daemon_->hutchAs(remote, {"rm", "-f", "remote-box"}).exit_code, 0);
}

TEST_F(RemoteTest, AnotherOwnersBoxDoesNotExistForAKey) {
  std::string alice = makeKey(*daemon_, {"alice"});
  std::string bob = makeKey(*daemon_, {"bob"});
  std::string admin = makeKey(*daemon_, {"boss", "--admin"});
  ASSERT_EQ(daemon_->hutchAs(pinned(alice), {"run", "-d", "--name", "alices"}).exit_code, 0);
  auto listed = daemon_->hutchAs(pinned(bob), {"--json", "ls"});
  ASSERT_EQ(listed.exit_code, 0);
  EXPECT_EQ(listed.out.find("alices"), std::string::npos) << listed.out;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"inspect", "alices"},
                                             {"exec", "alices", "--", "true"},
                                             {"stop", "alices"},
                                             {"rm", "-f", "alices"},
                                             {"fork", "alices"},
                                             {"checkpoint", "alices"},
                                             {"logs", "alices"},
                                             {"stats", "alices"},
                                             {"port", "alices", "18080:80"},
                                             {"policy", "show", "alices"}}) {
    auto r = daemon_->hutchAs(pinned(bob), args);
    EXPECT_EQ(r.exit_code, 66) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("alices"), std::string::npos) << r.err;
  }
  // The same id prefix that finds it for alice finds nothing for bob.
  std::string id = daemon_->inspect("alices").value("id", "");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(daemon_->hutchAs(pinned(bob), {"inspect", id.substr(0, 6)}).exit_code, 66);
  EXPECT_EQ(daemon_->hutchAs(pinned(alice), {"inspect", id.substr(0, 6)}).exit_code, 0);
  // Admin keys and the unix socket see everything.
  auto as_admin = daemon_->hutchAs(pinned(admin), {"exec", "alices", "--", "true"});
  EXPECT_EQ(as_admin.exit_code, 0) << as_admin.err;
  // Templates are shared read-only.
  EXPECT_EQ(daemon_->hutchAs(pinned(bob), {"template", "ls"}).exit_code, 0);
  auto build = daemon_->hutchAs(pinned(bob), {"template", "rm", "base"});
  EXPECT_EQ(build.exit_code, 77) << build.err;
  EXPECT_EQ(daemon_->hutchAs(pinned(bob), {"df"}).exit_code, 77);
  EXPECT_EQ(daemon_->hutchAs(pinned(bob), {"key", "ls"}).exit_code, 77);
  // Secrets are the owner's: bob cannot use alice's.
  ASSERT_EQ(daemon_
                ->hutchAs(pinned(alice), {"secret", "set", "TOKEN", "--domain", "api.test"},
                          "alice-secret-value", true)
                .exit_code,
            0);
  auto secrets = daemon_->hutchAs(pinned(bob), {"--json", "secret", "ls"});
  EXPECT_EQ(secrets.out.find("TOKEN"), std::string::npos) << secrets.out;
  auto uses = daemon_->hutchAs(pinned(bob), {"run", "-d", "--secret", "TOKEN"});
  EXPECT_EQ(uses.exit_code, 66) << uses.err;
  EXPECT_EQ(daemon_->hutchAs(pinned(alice), {"rm", "-f", "alices"}).exit_code, 0);
}

TEST_F(RemoteTest, QuotasAreCheckedAndTheErrorNamesTheLimit) {
  std::string key = makeKey(*daemon_, {"small", "--max-boxes", "1", "--max-cpus", "1"});
  RemoteCli remote = pinned(key);
  ASSERT_EQ(daemon_->hutchAs(remote, {"run", "-d", "--name", "only-one"}).exit_code, 0);
  auto second = daemon_->hutchAs(remote, {"run", "-d"});
  EXPECT_EQ(second.exit_code, 75) << second.err;
  EXPECT_NE(second.err.find("max_boxes"), std::string::npos) << second.err;
  auto fork = daemon_->hutchAs(remote, {"fork", "only-one"});
  EXPECT_EQ(fork.exit_code, 75) << fork.err;
  EXPECT_NE(fork.err.find("max_boxes"), std::string::npos) << fork.err;
  // Nothing was left behind by the refusals.
  auto listed = daemon_->hutchAs(remote, {"--json", "ls"});
  auto boxes = nlohmann::json::parse(listed.out, nullptr, false);
  ASSERT_TRUE(boxes.is_array());
  EXPECT_EQ(boxes.size(), 1u);
  EXPECT_EQ(daemon_->hutchAs(remote, {"rm", "-f", "only-one"}).exit_code, 0);
  auto wide = daemon_->hutchAs(remote, {"run", "-d", "--cpus", "2"});
  EXPECT_EQ(wide.exit_code, 75) << wide.err;
  EXPECT_NE(wide.err.find("max_cpus"), std::string::npos) << wide.err;
}

TEST_F(RemoteTest, RemovingAKeyEndsItsRunningSessionsAtOnce) {
  std::string key = makeKey(*daemon_, {"doomed"});
  RemoteCli remote = pinned(key);
  ASSERT_EQ(daemon_->hutchAs(remote, {"run", "-d", "--name", "doomed-box"}).exit_code, 0);
  auto out = daemon_->dir() / "doomed.out";
  auto err = daemon_->dir() / "doomed.err";
  pid_t cli = daemon_->startAs(
      remote, {"exec", "doomed-box", "--", "sh", "-c", "echo started; exec sleep 600"}, out, err);
  ASSERT_GT(cli, 0);
  for (int i = 0; i < 300 && readFile(out).find("started") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(readFile(out).find("started"), std::string::npos) << readFile(err);
  ASSERT_EQ(daemon_->hutch({"key", "rm", "doomed"}).exit_code, 0);
  CommandResult r = collect(cli, out, err);  // returns at once: the connection was closed
  EXPECT_NE(r.exit_code, 0);
  // And the command it ran is gone from the box.
  auto ps = daemon_->hutch(
      {"exec", "-u", "root", "doomed-box", "--", "sh", "-c", "pgrep -x sleep || echo none"});
  EXPECT_NE(ps.out.find("none"), std::string::npos) << ps.out;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "doomed-box"}).exit_code, 0);
}

TEST_F(RemoteTest, FailedAttemptsFromAnAddressAreRateLimitedButAValidKeyAlwaysPasses) {
  // A daemon of its own: the limit is per address, and 127.0.0.1 is shared with the other tests.
  // Two clients on that one address: a misconfigured one, and the hutch CLI with a good key.
  Daemon d({"--listen", "127.0.0.1:0"});
  Endpoints e = endpointsOf(d);
  std::string base = "curl -sS -o /dev/null -w '%{http_code}' --cacert " + quoted(e.ca.string()) +
                     " -H 'Authorization: Bearer e2b_bad' " + quoted(e.https + "/v1/boxes");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(shell(base).out, "401") << i;
  EXPECT_EQ(shell(base).out, "429");
  auto headers = shell("curl -sS -D - -o /dev/null --cacert " + quoted(e.ca.string()) + " " +
                       quoted(e.https + "/v1/boxes"));
  EXPECT_NE(headers.out.find("Retry-After:"), std::string::npos) << headers.out;
  RemoteCli good{{"--host", e.https, "--fingerprint", e.fingerprint}, makeKey(d, {"good"})};
  auto ls = d.hutchAs(good, {"ls"});
  EXPECT_EQ(ls.exit_code, 0) << "a valid key from the same address still passes: " << ls.err;
  EXPECT_EQ(shell(base).out, "429") << "while the bad one stays limited";
  EXPECT_EQ(d.hutch({"ls"}).exit_code, 0) << "the unix socket is not limited";
}

TEST(RemoteStartTest, PlainHttpIsRefusedOffLoopbackAndTheTlsFlagsGoTogether) {
  auto bad = shell(std::string(HUTCHD_BIN_DIR) + "/hutchd --listen-http 0.0.0.0:18081 " +
                   "--state-dir /tmp/hutch-never --socket /tmp/hutch-never.sock");
  EXPECT_EQ(bad.exit_code, 64);
  EXPECT_NE(bad.err.find("loopback"), std::string::npos) << bad.err;
  auto half = shell(std::string(HUTCHD_BIN_DIR) + "/hutchd --listen 127.0.0.1:0 --tls-cert " +
                    "/nope.pem --state-dir /tmp/hutch-never --socket /tmp/hutch-never.sock");
  EXPECT_EQ(half.exit_code, 64);
  EXPECT_NE(half.err.find("--tls-key"), std::string::npos) << half.err;
  EXPECT_FALSE(std::filesystem::exists("/tmp/hutch-never")) << "nothing was made";
}

TEST(RemoteStartTest, AGivenCertificateIsServedAndItsCaVerifiesIt) {
  auto dir =
      std::filesystem::temp_directory_path() / ("hutch-given-cert-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string d = quoted(dir.string());
  // A CA and a leaf for 127.0.0.1, made by openssl, not by hutch.
  auto made = shell(
      "cd " + d + " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes " +
      "-keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca && openssl req -newkey ec -pkeyopt " +
      "ec_paramgen_curve:P-256 -nodes -keyout leaf.key -out leaf.csr -subj /CN=127.0.0.1 && " +
      "printf 'subjectAltName=IP:127.0.0.1\\n' > ext && openssl x509 -req -in leaf.csr -CA "
      "ca.pem " +
      "-CAkey ca.key -CAcreateserial -out leaf.pem -days 2 -extfile ext");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  Daemon daemon({"--listen", "127.0.0.1:0", "--tls-cert", (dir / "leaf.pem").string(), "--tls-key",
                 (dir / "leaf.key").string()});
  Endpoints e = endpointsOf(daemon);
  std::string key = makeKey(daemon, {"given"});
  auto r = daemon.hutchAs(
      RemoteCli{{"--host", e.https, "--ca-cert", (dir / "ca.pem").string()}, key}, {"ls"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto fp = shell("openssl x509 -in " + quoted((dir / "leaf.pem").string()) +
                  " -noout -fingerprint -sha256");
  EXPECT_NE(fp.out.find(e.fingerprint), std::string::npos) << fp.out << " vs " << e.fingerprint;
  EXPECT_FALSE(std::filesystem::exists(daemon.stateDir() / "tls" / "cert.pem"))
      << "no certificate is made when one is given";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hutch::e2e

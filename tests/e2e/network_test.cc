// The wall around every box (docs/network.md), on real boxes, with a stand-in internet the test
// makes itself: hutchd runs in a "host" network namespace joined by a veth pair to an "inet"
// namespace, where a test resolver (dnsmasq) and HTTP and HTTPS servers (a test CA) answer for
// api.example.test and other.example.test. No other address is ever a target.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "egress/proxy/ca.h"
#include "harness.h"
#include "net/netns.h"
#include "sys/run.h"
#include "sys/spawn.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kHostAddress = "10.213.0.1";  // hutchd's side of the veth
constexpr const char* kInetAddress = "10.213.0.2";  // the stand-in internet
constexpr uint16_t kHostServicePort = 18080;        // a service on hutchd's host
constexpr const char* kRealKey = "sk-live-4f1c2a9e7d3b5f60a8c4e2d1b9f7a5c3";

// One stand-in server: a listening socket made in a namespace, served on a thread, one
// connection at a time. Answers "hello from HOST" (or, for /auth, whether the Authorization
// header carried the real key) and records every request head.
class Server {
 public:
  Server(const fs::path& netns, const char* address, uint16_t port, SSL_CTX* tls) : tls_(tls) {
    auto made = net::inNetns(netns, [&]() -> Result<> {
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      int one = 1;
      ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in sin{};
      sin.sin_family = AF_INET;
      sin.sin_port = htons(port);
      ::inet_pton(AF_INET, address, &sin.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0 ||
          ::listen(fd_, 64) != 0) {
        return fail(sysError("bind/listen", errno));
      }
      return ok();
    });
    EXPECT_TRUE(made) << made.error().describe();
    thread_ = std::thread([this] { serve(); });
  }
  ~Server() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::vector<std::string> heads() {
    std::lock_guard lock(mutex_);
    return heads_;
  }
  int accepted() const { return accepted_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      ++accepted_;
      timeval tv{5, 0};
      ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      handle(conn);
      ::close(conn);
    }
  }
  void handle(int conn) {
    SSL* ssl = nullptr;
    if (tls_) {
      ssl = SSL_new(tls_);
      SSL_set_fd(ssl, conn);
      if (SSL_accept(ssl) != 1) {
        SSL_free(ssl);
        return;
      }
    }
    auto readSome = [&](char* buf, int n) {
      return ssl ? SSL_read(ssl, buf, n) : static_cast<int>(::read(conn, buf, n));
    };
    std::string head;
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
      int n = readSome(buf, sizeof buf);
      if (n <= 0) break;
      head.append(buf, static_cast<size_t>(n));
    }
    if (!head.empty()) {
      std::lock_guard lock(mutex_);
      heads_.push_back(head);
    }
    std::string host;
    if (auto at = head.find("\r\nHost: "); at != std::string::npos) {
      host = head.substr(at + 8, head.find("\r\n", at + 8) - at - 8);
    }
    std::string body = "hello from " + host + "\n";
    if (head.starts_with("GET /auth")) {
      bool real = head.find(std::string("Authorization: Bearer ") + kRealKey) != std::string::npos;
      body = real ? "authorized\n" : "unauthorized\n";
    }
    std::string reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    if (ssl) {
      SSL_write(ssl, reply.data(), static_cast<int>(reply.size()));
      SSL_shutdown(ssl);
      SSL_free(ssl);
    } else {
      (void)!::write(conn, reply.data(), reply.size());
    }
  }

  SSL_CTX* tls_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::vector<std::string> heads_;
  std::thread thread_;
};

void run(const std::vector<std::string>& argv) {
  auto done = sys::runCapture(argv);
  ASSERT_TRUE(done) << done.error().describe();
}

// The stand-in internet and the test's host network.
class World {
 public:
  World() {
    std::string tag = std::to_string(::getpid());
    host_ = "hutch-t-host-" + tag;
    inet_ = "hutch-t-inet-" + tag;
    dir_ = fs::temp_directory_path() / ("hutch-world-" + tag);
    fs::create_directories(dir_);
    for (const auto& ns : {host_, inet_}) {
      (void)sys::runCapture({"ip", "netns", "delete", ns});
      run({"ip", "netns", "add", ns});
      run({"ip", "-n", ns, "link", "set", "lo", "up"});
    }
    run({"ip", "-n", host_, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1",
         "netns", inet_});
    run({"ip", "-n", host_, "addr", "add", std::string(kHostAddress) + "/24", "dev", "veth0"});
    run({"ip", "-n", inet_, "addr", "add", std::string(kInetAddress) + "/24", "dev", "veth1"});
    run({"ip", "-n", host_, "link", "set", "veth0", "up"});
    run({"ip", "-n", inet_, "link", "set", "veth1", "up"});
    // hutch-egress's resolver is the test resolver (hutchd --egress-resolv-conf).
    std::ofstream(dir_ / "resolv.conf") << "nameserver " << kInetAddress << "\n";
    auto pid =
        sys::spawn({.argv = {"ip", "netns", "exec", inet_, "dnsmasq", "--keep-in-foreground",
                             "--no-resolv", "--no-hosts", "--bind-interfaces",
                             std::string("--listen-address=") + kInetAddress,
                             std::string("--address=/api.example.test/") + kInetAddress,
                             std::string("--address=/other.example.test/") + kInetAddress,
                             std::string("--address=/host.example.test/") + kHostAddress,
                             "--pid-file=" + (dir_ / "dnsmasq.pid").string(), "--user=root"}});
    EXPECT_TRUE(pid) << pid.error().describe();
    if (pid) dnsmasq_ = *pid;

    // A test CA, the HTTPS server's certificate, and the file hutch-egress trusts it from.
    auto ca = egress::proxy::makeBoxCa("test-internet");
    EXPECT_TRUE(ca);
    auto authority = egress::proxy::CertAuthority::load(*ca);
    EXPECT_TRUE(authority);
    auto leaf = authority->mintLeaf("api.example.test");
    EXPECT_TRUE(leaf);
    std::ofstream(dir_ / "ca.pem") << ca->cert;
    std::ofstream(dir_ / "leaf.pem") << leaf->cert;
    std::ofstream(dir_ / "leaf.key") << leaf->key;
    tls_ = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate_file(tls_, (dir_ / "leaf.pem").c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_use_PrivateKey_file(tls_, (dir_ / "leaf.key").c_str(), SSL_FILETYPE_PEM);

    fs::path inet = net::netnsPath(inet_);
    http_ = std::make_unique<Server>(inet, kInetAddress, 80, nullptr);
    https_ = std::make_unique<Server>(inet, kInetAddress, 443, tls_);
    host_service_ =
        std::make_unique<Server>(net::netnsPath(host_), "0.0.0.0", kHostServicePort, nullptr);
  }
  ~World() {
    http_.reset();
    https_.reset();
    host_service_.reset();
    if (dnsmasq_ > 0) {
      ::kill(dnsmasq_, SIGTERM);
      ::waitpid(dnsmasq_, nullptr, 0);
    }
    if (tls_) SSL_CTX_free(tls_);
    for (const auto& ns : {host_, inet_}) (void)sys::runCapture({"ip", "netns", "delete", ns});
    fs::remove_all(dir_);
  }
  const std::string& hostNs() const { return host_; }
  fs::path caFile() const { return dir_ / "ca.pem"; }
  Server& http() { return *http_; }
  Server& https() { return *https_; }
  Server& hostService() { return *host_service_; }
  const fs::path& dir() const { return dir_; }

 private:
  std::string host_;
  std::string inet_;
  fs::path dir_;
  pid_t dnsmasq_ = -1;
  SSL_CTX* tls_ = nullptr;
  std::unique_ptr<Server> http_;
  std::unique_ptr<Server> https_;
  std::unique_ptr<Server> host_service_;
};

class NetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    world_ = std::make_unique<World>();
    daemon_ = std::make_unique<Daemon>(
        std::vector<std::string>{"--egress-upstream-ca", world_->caFile().string(),
                                 "--egress-resolv-conf", (world_->dir() / "resolv.conf").string()},
        world_->hostNs());
  }
  void TearDown() override {
    daemon_.reset();
    world_.reset();
  }
  Daemon& d() { return *daemon_; }

  // A policy file in the test's directory.
  std::string policyFile(const std::string& name, const json& policy) {
    fs::path path = world_->dir() / (name + ".json");
    std::ofstream(path) << policy.dump();
    return path.string();
  }
  CommandResult inBox(const std::string& box, const std::string& script) {
    return d().hutch({"exec", box, "--", "sh", "-c", script});
  }
  // curl in the box: the body on success, "" on any failure (exit code or an HTTP error).
  std::string curl(const std::string& box, const std::string& args) {
    auto r = inBox(box, "curl -fsS --max-time 15 " + args);
    return r.exit_code == 0 ? r.out : "";
  }
  json policyLog(const std::string& box) {
    auto r = d().hutch({"--json", "policy", "log", box});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json entries = json::array();
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      json e = json::parse(line, nullptr, false);
      if (e.is_object()) entries.push_back(e);
    }
    return entries;
  }
  static bool logged(const json& entries, const std::string& host, const std::string& decision) {
    for (const auto& e : entries) {
      if (e.value("host", "") == host && e.value("decision", "") == decision) return true;
    }
    return false;
  }

  std::unique_ptr<World> world_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(NetworkTest, AllowedNamesWorkEverythingElseIsRefusedAndLogged) {
  std::string policy = policyFile("api", {{"allow", {{{"domain", "api.example.test"}}}}});
  ASSERT_EQ(d().hutch({"run", "--name", "web", "--network-policy", policy}).exit_code, 0);

  // DNS answers only the allowed name.
  auto allowed = inBox("web", "getent hosts api.example.test");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_NE(allowed.out.find(kInetAddress), std::string::npos) << allowed.out;
  auto refused = inBox("web", "getent hosts other.example.test");
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_EQ(refused.out.find(kInetAddress), std::string::npos) << refused.out;

  // HTTP and HTTPS (tunnelled: the box sees the server's own certificate) to the allowed name.
  EXPECT_EQ(curl("web", "http://api.example.test/"), "hello from api.example.test\n");
  EXPECT_EQ(curl("web", "-k https://api.example.test/"), "hello from api.example.test\n");
  // Another name, even with its address supplied, and a raw IP are refused by the proxy.
  int before = world_->http().accepted() + world_->https().accepted();
  EXPECT_EQ(curl("web", "--resolve other.example.test:80:10.213.0.2 http://other.example.test/"),
            "");
  EXPECT_EQ(curl("web",
                 "-k --resolve other.example.test:443:10.213.0.2 "
                 "https://other.example.test/"),
            "");
  EXPECT_EQ(curl("web", "http://10.213.0.2/"), "");
  EXPECT_EQ(world_->http().accepted() + world_->https().accepted(), before)
      << "a refused request reached the server";

  json log = policyLog("web");
  EXPECT_TRUE(logged(log, "api.example.test", "allow")) << log.dump(1);
  EXPECT_TRUE(logged(log, "other.example.test", "deny")) << log.dump(1);
  bool bytes = false;
  for (const auto& e : log) {
    if (e.value("host", "") == "api.example.test" && e.value("proto", "") != "dns" &&
        e.value("bytes_down", 0) > 0) {
      bytes = true;
    }
  }
  EXPECT_TRUE(bytes) << "allowed connections are logged with their bytes: " << log.dump(1);
  auto table = d().hutch({"policy", "log", "web"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("DESTINATION"), std::string::npos) << table.out;
}

TEST_F(NetworkTest, BoxesReachNeitherTheHostNorMetadataNorEachOther) {
  // Even allow-all opens only names: the host, its services, link-local addresses and other
  // boxes stay out of reach.
  ASSERT_EQ(d().hutch({"run", "--name", "a", "--network-policy", "allow-all"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"run", "--name", "b", "--network-policy", "allow-all"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"exec", "-d", "b", "--", "python3", "-m", "http.server", "8000"}).exit_code,
            0);
  EXPECT_EQ(curl("a", "http://api.example.test/"), "hello from api.example.test\n");
  for (const std::string& target :
       {std::string("http://10.213.0.1:18080/"),         // the host's address
        std::string("http://host.example.test:18080/"),  // a name for it
        std::string("http://10.0.2.2:18080/"),           // the gateway
        std::string("http://169.254.169.254/latest/meta-data/"),
        std::string("http://10.0.2.15:8000/")}) {  // box b's address (it is every box's)
    EXPECT_EQ(curl("a", target), "") << target << " was reachable";
  }
  EXPECT_EQ(world_->hostService().accepted(), 0) << "a box reached a service on the host";
  json log = policyLog("a");
  EXPECT_TRUE(logged(log, "host.example.test", "deny")) << log.dump(1);
}

TEST_F(NetworkTest, APolicyChangeTakesEffectWithoutARestart) {
  ASSERT_EQ(d().hutch({"run", "--name", "live"}).exit_code, 0);  // default: none
  auto shown = d().hutch({"--json", "policy", "show", "live"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out)["policy"],
            json({{"allow", json::array()}, {"deny", json::array()}}))
      << shown.out;
  EXPECT_EQ(curl("live", "http://api.example.test/"), "");
  int64_t pid = d().inspect("live").value("pid", int64_t{0});

  std::string policy =
      policyFile("live", {{"allow", {{{"domain", "*.example.test"}, {"ports", {80}}}}}});
  auto set = d().hutch({"policy", "set", "live", policy});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("*.example.test:80"), std::string::npos) << set.out;
  EXPECT_EQ(curl("live", "http://api.example.test/"), "hello from api.example.test\n");
  EXPECT_EQ(curl("live", "-k https://api.example.test/"), "") << "port 443 is not allowed";
  EXPECT_EQ(d().inspect("live").value("pid", int64_t{0}), pid) << "the box was restarted";

  ASSERT_EQ(d().hutch({"policy", "set", "live", "none"}).exit_code, 0);
  EXPECT_EQ(curl("live", "http://api.example.test/"), "");
}

TEST_F(NetworkTest, TheUpstreamGetsTheKeyTheBoxOnlyEverHasThePlaceholder) {
  auto set = d().hutch({"secret", "set", "--domain", "api.example.test", "--header",
                        "Authorization", "--format", "Bearer {value}", "API_KEY"},
                       std::string(kRealKey) + "\n", true);
  ASSERT_EQ(set.exit_code, 0) << set.err;
  auto secrets_dir = d().stateDir() / "secrets";
  EXPECT_EQ(fs::status(secrets_dir).permissions() & fs::perms::all, fs::perms::owner_all);
  std::string policy = policyFile("key", {{"allow", {{{"domain", "api.example.test"}}}}});
  ASSERT_EQ(d().hutch({"run", "--name", "agent", "--network-policy", policy, "--secret", "API_KEY"})
                .exit_code,
            0);
  auto env = inBox("agent", "printenv API_KEY");
  ASSERT_EQ(env.exit_code, 0) << env.err;
  std::string placeholder = env.out.substr(0, env.out.find('\n'));
  EXPECT_EQ(placeholder.rfind("hutch-secret-API_KEY-", 0), 0u) << placeholder;

  // The box's own CA is trusted in the box (no -k): hutch-egress terminates TLS for the bound
  // name and sends the real key upstream.
  EXPECT_EQ(curl("agent", "-H \"Authorization: Bearer $API_KEY\" https://api.example.test/auth"),
            "authorized\n");
  bool upstream_saw_key = false;
  for (const auto& head : world_->https().heads()) {
    upstream_saw_key = upstream_saw_key || head.find(kRealKey) != std::string::npos;
  }
  EXPECT_TRUE(upstream_saw_key);

  // Host and SNI disagree: refused before anything reaches the server.
  size_t heads = world_->https().heads().size();
  EXPECT_EQ(curl("agent", "-H 'Host: other.example.test' https://api.example.test/auth"), "");
  EXPECT_EQ(world_->https().heads().size(), heads);

  // Nowhere in the box: not its environment, not its disk, not its memory (a checkpoint
  // holds all of its RAM), not hutchd's logs. The placeholder is found where the key is not.
  auto all_env = inBox("agent", "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env");
  EXPECT_EQ(all_env.out.find(kRealKey), std::string::npos);
  EXPECT_NE(all_env.out.find(placeholder), std::string::npos);
  ASSERT_EQ(d().hutch({"exec", "agent", "--", "sync"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"checkpoint", "--name", "search", "agent"}).exit_code, 0);
  auto search = [&](const std::string& needle) {
    return sys::runCapture(
        {"grep", "-rlaF", needle, d().stateDir().string(), (d().dir() / "hutchd.log").string()});
  };
  auto key_hits = search(kRealKey);
  // grep exits 1 when nothing matches: runCapture reports that as an error.
  std::string hits = key_hits ? *key_hits : "";
  for (const std::string& allowed : {std::string("/secrets/API_KEY.json")}) {
    auto at = hits.find(allowed);
    if (at != std::string::npos) hits.erase(hits.rfind('\n', at) + 1, hits.find('\n', at) + 1);
  }
  EXPECT_EQ(hits, "") << "the real key is in these files besides the secret store";
  auto placeholder_hits = search(placeholder);
  ASSERT_TRUE(placeholder_hits);
  EXPECT_NE(placeholder_hits->find("state"), std::string::npos)
      << "the search must find the placeholder in the box's memory: " << *placeholder_hits;
}

TEST_F(NetworkTest, NetworkComesBackAfterHutchEgressOrHutchdDies) {
  std::string policy = policyFile("api", {{"allow", {{{"domain", "api.example.test"}}}}});
  ASSERT_EQ(d().hutch({"run", "--name", "s", "--network-policy", policy}).exit_code, 0);
  EXPECT_EQ(curl("s", "http://api.example.test/"), "hello from api.example.test\n");

  // hutch-egress killed: hutchd starts a new one and hands it the box's sockets again.
  auto egressPid = [&] { return std::stoi(readFile(d().stateDir() / "egress" / "egress.pid")); };
  pid_t egress = egressPid();
  ASSERT_TRUE(processAlive(egress));
  ::kill(egress, SIGKILL);
  std::string body;
  for (int i = 0; i < 20 && body.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    body = curl("s", "http://api.example.test/");
  }
  EXPECT_EQ(body, "hello from api.example.test\n");
  EXPECT_NE(egressPid(), egress);

  // hutchd killed: the box runs on; the new hutchd adopts it and serves it again, with its
  // policy (other.example.test stays refused). The old hutch-egress goes (its control socket
  // closed; a new hutchd also kills one it finds).
  pid_t old_egress = egressPid();
  d().crashAndRestart();
  for (int i = 0; i < 50 && processAlive(old_egress); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(processAlive(old_egress));
  EXPECT_EQ(curl("s", "http://api.example.test/"), "hello from api.example.test\n");
  EXPECT_EQ(curl("s", "--resolve other.example.test:80:10.213.0.2 http://other.example.test/"), "");
  // A stopped box keeps its policy; started again it has network again.
  ASSERT_EQ(d().hutch({"stop", "s"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"start", "s"}).exit_code, 0);
  EXPECT_EQ(curl("s", "http://api.example.test/"), "hello from api.example.test\n");
}

TEST_F(NetworkTest, ForksKeepTheirParentsPolicyAndSecrets) {
  auto set = d().hutch({"secret", "set", "--domain", "api.example.test", "--header",
                        "Authorization", "--format", "Bearer {value}", "API_KEY"},
                       std::string(kRealKey) + "\n", true);
  ASSERT_EQ(set.exit_code, 0) << set.err;
  std::string policy = policyFile("key", {{"allow", {{{"domain", "api.example.test"}}}}});
  ASSERT_EQ(d().hutch({"run", "--name", "p", "--network-policy", policy, "--secret", "API_KEY"})
                .exit_code,
            0);
  auto forked = d().hutch({"fork", "--name", "child", "p"});
  ASSERT_EQ(forked.exit_code, 0) << forked.err;
  EXPECT_EQ(inBox("child", "printenv API_KEY").out, inBox("p", "printenv API_KEY").out);
  EXPECT_EQ(curl("child", "-H \"Authorization: Bearer $API_KEY\" https://api.example.test/auth"),
            "authorized\n");
  EXPECT_EQ(curl("child", "http://other.example.test/"), "");
}

TEST_F(NetworkTest, ATemplateCarriesItsDefaultPolicyAndTheExplicitProxyWorks) {
  // A template of the test image (hard links) with its own network-policy.json.
  fs::path image = std::getenv("HUTCH_TEST_IMAGE");
  fs::path fenced = d().stateDir() / "templates" / "fenced";
  fs::create_directories(fenced);
  for (const char* file : {"vmlinux", "initrd.img", "rootfs.img", "manifest.json"}) {
    fs::create_hard_link(fs::canonical(image / file), fenced / file);
  }
  std::ofstream(fenced / "network-policy.json")
      << json{{"allow", {{{"domain", "api.example.test"}, {"ports", {80}}}}}}.dump();
  ASSERT_EQ(d().hutch({"run", "--name", "f", "--template", "fenced"}).exit_code, 0);
  auto shown = d().hutch({"policy", "show", "f"});
  EXPECT_NE(shown.out.find("api.example.test:80"), std::string::npos) << shown.out;
  EXPECT_EQ(curl("f", "http://api.example.test/"), "hello from api.example.test\n");
  // The same through the explicit proxy (HTTP_PROXY style, CONNECT for TLS).
  EXPECT_EQ(curl("f", "-x http://10.0.2.2:3128 http://api.example.test/"),
            "hello from api.example.test\n");
  EXPECT_EQ(curl("f", "-x http://10.0.2.2:3128 -k https://api.example.test/"), "")
      << "CONNECT to port 443 is outside the template's policy";
  // A box of the base template still gets the daemon's default: none.
  ASSERT_EQ(d().hutch({"run", "--name", "plain"}).exit_code, 0);
  EXPECT_EQ(curl("plain", "http://api.example.test/"), "");
  json log = policyLog("f");
  bool connect_denied = false;
  for (const auto& e : log) {
    connect_denied =
        connect_denied || (e.value("proto", "") == "connect" && e.value("decision", "") == "deny");
  }
  EXPECT_TRUE(connect_denied) << log.dump(1);
}

TEST_F(NetworkTest, BadPoliciesAndSecretsAreClearErrorsAndChangeNothing) {
  std::string bad = policyFile("bad", {{"allow", {{{"domain", "10.0.0.1"}}}}});
  auto run = d().hutch({"run", "--name", "x", "--network-policy", bad});
  EXPECT_EQ(run.exit_code, 64) << run.err;
  EXPECT_NE(run.err.find("allow[0]"), std::string::npos) << run.err;
  auto missing = d().hutch({"run", "--name", "x", "--network-policy", "/nonexistent.json"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("preset"), std::string::npos) << missing.err;
  auto secret = d().hutch({"run", "--name", "x", "--secret", "NOPE"});
  EXPECT_EQ(secret.exit_code, 66) << secret.err;
  EXPECT_NE(secret.err.find("hutch secret set NOPE"), std::string::npos) << secret.err;
  EXPECT_EQ(d().hutch({"--json", "ls"}).out, "[]\n") << "a refused create left a box";

  auto name = d().hutch({"secret", "set", "--domain", "a.test", "lower"}, "v\n", true);
  EXPECT_EQ(name.exit_code, 64) << name.err;
  auto unbound = d().hutch({"secret", "set", "--domain", "1.2.3.4", "K"}, "v\n", true);
  EXPECT_EQ(unbound.exit_code, 64) << unbound.err;
  auto listed = d().hutch({"--json", "secret", "ls"});
  EXPECT_EQ(listed.out, "[]\n") << listed.out;

  ASSERT_EQ(d().hutch({"run", "--name", "y"}).exit_code, 0);
  auto set = d().hutch({"policy", "set", "y", bad});
  EXPECT_EQ(set.exit_code, 64) << set.err;
  auto kept = d().hutch({"--json", "policy", "show", "y"});
  EXPECT_EQ(json::parse(kept.out)["policy"]["allow"], json::array()) << kept.out;
  EXPECT_EQ(d().hutch({"policy", "show", "nosuchbox"}).exit_code, 66);
}

}  // namespace
}  // namespace hutch::e2e

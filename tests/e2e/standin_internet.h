// The stand-in internet of the network tests (network_test.cc, registry_test.cc): hutchd runs
// in a "host" network namespace joined by a veth pair to an "inet" namespace, where a test
// resolver (dnsmasq) and HTTP and HTTPS servers (a test CA) answer. Addresses are the test's
// own: documentation ranges for the stand-in internet, and, to show they stay out of reach, a
// private network, a link-local "metadata" address (both in the inet namespace, routed from the
// host one) and the host namespace's own addresses. No other address is ever a target.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
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
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "egress/proxy/ca.h"
#include "harness.h"
#include "net/netns.h"
#include "sys/run.h"
#include "sys/spawn.h"

namespace hutch::e2e {

inline constexpr const char* kHostAddress = "198.51.100.1";  // hutchd's side of the veth
inline constexpr const char* kInetAddress = "198.51.100.2";  // the stand-in internet
inline constexpr const char* kLanAddress = "192.168.213.2";  // a private network behind the host
inline constexpr const char* kMetadataAddress = "169.254.169.254";
inline constexpr uint16_t kHostServicePort = 18080;  // a service on hutchd's host
inline constexpr uint16_t kUdpSinkPort = 9999;
inline constexpr const char* kRealKey = "sk-live-4f1c2a9e7d3b5f60a8c4e2d1b9f7a5c3";

// One stand-in server: a listening socket made in a namespace, served on a thread, one
// connection at a time. Answers "hello from HOST" (or, for /auth, whether the Authorization
// header carried the real key, echoing that header back as X-Echo-Authorization) and records
// every request head.
class Server {
 public:
  // With `files`, a GET of a path that names a file below it (a directory: its index.html)
  // answers that file: a static registry.
  Server(const std::filesystem::path& netns, const char* address, uint16_t port, SSL_CTX* tls,
         std::filesystem::path files = {})
      : tls_(tls), files_(std::move(files)) {
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
        return fail(sysError(std::string("bind/listen ") + address, errno));
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
    auto field = [&](const std::string& name) {
      auto at = head.find("\r\n" + name + ": ");
      if (at == std::string::npos) return std::string();
      at += name.size() + 4;
      return head.substr(at, head.find("\r\n", at) - at);
    };
    std::string body = "hello from " + field("Host") + "\n";
    std::string extra;
    std::string status = "200 OK";
    std::string type = "text/plain";
    if (!files_.empty() && head.starts_with("GET /")) {
      std::string path = head.substr(4, head.find(' ', 4) - 4);
      path = path.substr(0, path.find('?'));
      std::filesystem::path file = files_ / path.substr(1);
      if (std::filesystem::is_directory(file)) file /= "index.html";
      if (path.find("..") == std::string::npos && std::filesystem::is_regular_file(file)) {
        body = readFile(file);
        if (file.extension() == ".html") type = "text/html";
      } else {
        status = "404 Not Found";
        body = "no " + path + "\n";
      }
    }
    if (head.starts_with("GET /auth")) {
      bool real = field("Authorization") == std::string("Bearer ") + kRealKey;
      body = real ? "authorized\n" : "unauthorized\n";
      extra = "X-Echo-Authorization: " + field("Authorization") + "\r\n";
    }
    std::string reply = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                        "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
                        "Connection: close\r\n\r\n" + body;
    if (ssl) {
      SSL_write(ssl, reply.data(), static_cast<int>(reply.size()));
      SSL_shutdown(ssl);
      SSL_free(ssl);
    } else {
      (void)!::write(conn, reply.data(), reply.size());
    }
  }

  SSL_CTX* tls_;
  std::filesystem::path files_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::vector<std::string> heads_;
  std::thread thread_;
};

// A UDP socket in a namespace that counts the datagrams it has received.
class UdpSink {
 public:
  UdpSink(const std::filesystem::path& netns, const char* address, uint16_t port) {
    auto made = net::inNetns(netns, [&]() -> Result<> {
      fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      sockaddr_in sin{};
      sin.sin_family = AF_INET;
      sin.sin_port = htons(port);
      ::inet_pton(AF_INET, address, &sin.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) {
        return fail(sysError("bind udp", errno));
      }
      return ok();
    });
    EXPECT_TRUE(made) << made.error().describe();
  }
  ~UdpSink() { ::close(fd_); }
  int received() {
    char buf[2048];
    while (::recv(fd_, buf, sizeof buf, 0) >= 0) ++received_;
    return received_;
  }

 private:
  int fd_ = -1;
  int received_ = 0;
};

inline void run(const std::vector<std::string>& argv) {
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
    dir_ = std::filesystem::temp_directory_path() / ("hutch-world-" + tag);
    std::filesystem::create_directories(dir_);
    for (const auto& ns : {host_, inet_}) {
      (void)sys::runCapture({"ip", "netns", "delete", ns});
      run({"ip", "netns", "add", ns});
      run({"ip", "-n", ns, "link", "set", "lo", "up"});
    }
    run({"ip", "-n", host_, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1",
         "netns", inet_});
    run({"ip", "-n", host_, "addr", "add", std::string(kHostAddress) + "/24", "dev", "veth0"});
    run({"ip", "-n", inet_, "addr", "add", std::string(kInetAddress) + "/24", "dev", "veth1"});
    // A private network on the same link, and a metadata address behind the inet namespace:
    // reachable from the host namespace, where hutch-egress connects from.
    run({"ip", "-n", host_, "addr", "add", "192.168.213.1/24", "dev", "veth0"});
    run({"ip", "-n", inet_, "addr", "add", std::string(kLanAddress) + "/24", "dev", "veth1"});
    run({"ip", "-n", inet_, "addr", "add", std::string(kMetadataAddress) + "/32", "dev", "veth1"});
    run({"ip", "-n", host_, "link", "set", "veth0", "up"});
    run({"ip", "-n", inet_, "link", "set", "veth1", "up"});
    run({"ip", "-n", host_, "route", "add", std::string(kMetadataAddress) + "/32", "via",
         kInetAddress});
    // hutch-egress's resolver is the test resolver (hutchd --egress-resolv-conf).
    std::ofstream(dir_ / "resolv.conf") << "nameserver " << kInetAddress << "\n";
    std::vector<std::string> dnsmasq = {"ip",
                                        "netns",
                                        "exec",
                                        inet_,
                                        "dnsmasq",
                                        "--keep-in-foreground",
                                        "--no-resolv",
                                        "--no-hosts",
                                        "--bind-interfaces",
                                        std::string("--listen-address=") + kInetAddress,
                                        "--pid-file=" + (dir_ / "dnsmasq.pid").string(),
                                        "--user=root"};
    for (const auto& [name, address] : std::vector<std::pair<std::string, std::string>>{
             {"api.example.test", kInetAddress},
             {"other.example.test", kInetAddress},
             {"host.example.test", kHostAddress},
             {"loopback.example.test", "127.0.0.1"},
             {"metadata.example.test", kMetadataAddress},
             {"lan.example.test", kLanAddress},
             {"b.example.test", "10.0.2.15"},  // every box's own address
             {"gateway.example.test", "10.0.2.2"},
             {"registry.example.test", kInetAddress}}) {
      dnsmasq.push_back("--address=/" + name + "/" + address);
    }
    auto pid = sys::spawn({.argv = dnsmasq});
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

    std::filesystem::path inet = net::netnsPath(inet_);
    http_ = std::make_unique<Server>(inet, kInetAddress, 80, nullptr);
    https_ = std::make_unique<Server>(inet, kInetAddress, 443, tls_);
    lan_ = std::make_unique<Server>(inet, kLanAddress, 80, nullptr);
    metadata_ = std::make_unique<Server>(inet, kMetadataAddress, 80, nullptr);
    udp_ = std::make_unique<UdpSink>(inet, kInetAddress, kUdpSinkPort);
    host_service_ =
        std::make_unique<Server>(net::netnsPath(host_), "0.0.0.0", kHostServicePort, nullptr);
  }
  ~World() {
    http_.reset();
    https_.reset();
    lan_.reset();
    metadata_.reset();
    udp_.reset();
    host_service_.reset();
    if (dnsmasq_ > 0) {
      ::kill(dnsmasq_, SIGTERM);
      ::waitpid(dnsmasq_, nullptr, 0);
    }
    if (tls_) SSL_CTX_free(tls_);
    for (const auto& ns : {host_, inet_}) (void)sys::runCapture({"ip", "netns", "delete", ns});
    std::filesystem::remove_all(dir_);
  }
  const std::string& hostNs() const { return host_; }
  std::filesystem::path inetNs() const { return net::netnsPath(inet_); }
  std::filesystem::path caFile() const { return dir_ / "ca.pem"; }
  Server& http() { return *http_; }
  Server& https() { return *https_; }
  Server& lan() { return *lan_; }
  Server& metadata() { return *metadata_; }
  UdpSink& udp() { return *udp_; }
  Server& hostService() { return *host_service_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::string host_;
  std::string inet_;
  std::filesystem::path dir_;
  pid_t dnsmasq_ = -1;
  SSL_CTX* tls_ = nullptr;
  std::unique_ptr<Server> http_;
  std::unique_ptr<Server> https_;
  std::unique_ptr<Server> lan_;
  std::unique_ptr<Server> metadata_;
  std::unique_ptr<UdpSink> udp_;
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
  std::string policyFile(const std::string& name, const nlohmann::json& policy) {
    std::filesystem::path path = world_->dir() / (name + ".json");
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
  static nlohmann::json parseLines(const std::string& text) {
    nlohmann::json entries = nlohmann::json::array();
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
      if (e.is_object()) entries.push_back(e);
    }
    return entries;
  }
  nlohmann::json policyLog(const std::string& box) {
    auto r = d().hutch({"--json", "policy", "log", box});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return parseLines(r.out);
  }
  static bool logged(const nlohmann::json& entries, const std::string& host,
                     const std::string& decision) {
    for (const auto& e : entries) {
      if (e.value("host", "") == host && e.value("decision", "") == decision) return true;
    }
    return false;
  }
  // A denied entry (not a DNS one) for `host` whose reason contains `why`.
  static bool refusedFor(const nlohmann::json& entries, const std::string& host,
                         const std::string& why) {
    for (const auto& e : entries) {
      if (e.value("host", "") == host && e.value("proto", "") != "dns" &&
          e.value("decision", "") == "deny" &&
          e.value("reason", "").find(why) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
  // The first entry matching `match`, polling the log (dropped packets reach it through
  // hutch-egress and hutchd); null when none came before the hang guard.
  nlohmann::json waitForEntry(const std::string& box,
                              const std::function<bool(const nlohmann::json&)>& match) {
    for (int i = 0; i < 100; ++i) {
      for (const auto& e : policyLog(box)) {
        if (match(e)) return e;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return nullptr;
  }

  std::unique_ptr<World> world_;
  std::unique_ptr<Daemon> daemon_;
};

}  // namespace hutch::e2e

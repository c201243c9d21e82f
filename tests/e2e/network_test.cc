// The wall around every box (docs/network.md), on real boxes, with a stand-in internet the test
// makes itself: hutchd runs in a "host" network namespace joined by a veth pair to an "inet"
// namespace, where a test resolver (dnsmasq) and HTTP and HTTPS servers (a test CA) answer.
// Addresses are the test's own: documentation ranges for the stand-in internet, and, to show
// they stay out of reach, a private network, a link-local "metadata" address (both in the inet
// namespace, routed from the host one) and the host namespace's own addresses. No other address
// is ever a target.
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
#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

#include "egress/proxy/ca.h"
#include "harness.h"
#include "net/netns.h"
#include "standin_internet.h"
#include "sys/run.h"
#include "sys/spawn.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Whether the file holds `needle`, read in chunks that overlap by the needle's length.
bool fileContains(const fs::path& path, const std::string& needle) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::string window;
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    window.append(chunk.data(), static_cast<size_t>(in.gcount()));
    if (window.find(needle) != std::string::npos) return true;
    if (window.size() > needle.size()) window.erase(0, window.size() - needle.size());
  }
  return false;
}

// The guest RAM of a running box, straight from its QEMU: the mappings of the guest's memory
// size in /proc/PID/maps (a restored box maps its template snapshot's memory file privately, so
// every page the guest wrote is QEMU's own), read through /proc/PID/mem. Which of `needles` they
// hold.
std::vector<bool> guestRamHolds(int64_t pid, uint64_t memory_mib,
                                const std::vector<std::string>& needles) {
  std::vector<bool> found(needles.size(), false);
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::vector<std::pair<uint64_t, uint64_t>> ram;
  for (std::string line; std::getline(maps, line);) {
    uint64_t begin = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
    uint64_t end = std::stoull(line.substr(line.find('-') + 1, line.find(' ')), nullptr, 16);
    if (end - begin == memory_mib << 20) ram.emplace_back(begin, end);
  }
  EXPECT_FALSE(ram.empty()) << "no mapping of the guest's " << memory_mib << " MiB";
  int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  if (fd < 0) return found;
  size_t overlap = 0;
  for (const auto& n : needles) overlap = std::max(overlap, n.size());
  for (const auto& [begin, end] : ram) {
    std::string window;
    std::vector<char> chunk(4 << 20);
    for (uint64_t at = begin; at < end; at += chunk.size()) {
      ssize_t n = ::pread(fd, chunk.data(), std::min<uint64_t>(chunk.size(), end - at),
                          static_cast<off_t>(at));
      EXPECT_GT(n, 0) << "reading guest RAM at " << std::hex << at;
      if (n <= 0) break;
      window.append(chunk.data(), static_cast<size_t>(n));
      for (size_t i = 0; i < needles.size(); ++i) {
        found[i] = found[i] || window.find(needles[i]) != std::string::npos;
      }
      window.erase(0, window.size() > overlap ? window.size() - overlap : 0);
    }
  }
  ::close(fd);
  return found;
}

// The network namespace hutchd made for a box's VM: named hutch-<uid base hex>-<index>, where
// its QEMU runs as uid base + index.
std::string boxNetns(const json& box) {
  std::ifstream status("/proc/" + std::to_string(box.value("pid", int64_t{0})) + "/status");
  uint64_t uid = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("Uid:")) uid = std::stoull(line.substr(4));
  }
  EXPECT_NE(uid, 0u) << "no QEMU for " << box.dump();
  static const std::regex kName("hutch-([0-9a-f]+)-([0-9]+)");
  for (const auto& entry : fs::directory_iterator("/run/netns")) {
    std::string name = entry.path().filename().string();
    std::smatch m;
    if (std::regex_match(name, m, kName) &&
        std::stoull(m[1].str(), nullptr, 16) + std::stoull(m[2].str()) == uid) {
      return name;
    }
  }
  ADD_FAILURE() << "no namespace for uid " << uid;
  return "";
}

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
  EXPECT_EQ(curl("web", "--resolve other.example.test:80:198.51.100.2 http://other.example.test/"),
            "");
  EXPECT_EQ(curl("web",
                 "-k --resolve other.example.test:443:198.51.100.2 "
                 "https://other.example.test/"),
            "");
  EXPECT_EQ(curl("web", "http://198.51.100.2/"), "");
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

TEST_F(NetworkTest, ABoxCannotReachAnotherBoxByAnyRoute) {
  // Even allow-all opens only names, and no name leads to another box.
  ASSERT_EQ(d().hutch({"run", "--name", "a", "--network-policy", "allow-all"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"run", "--name", "b", "--network-policy", "allow-all"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"exec", "-d", "b", "--", "sh", "-c",
                       "exec python3 -m http.server 8000 >/tmp/server.log 2>&1"})
                .exit_code,
            0);
  // b's server answers inside b, on its loopback and on its own address (the address every
  // box has).
  std::string inside;
  for (int i = 0; i < 50 && inside.empty(); ++i) {
    inside = curl("b", "-o /dev/null -w '%{http_code}' http://127.0.0.1:8000/");
    if (inside.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(inside, "200") << "b's server did not start";
  ASSERT_EQ(curl("b", "-o /dev/null -w '%{http_code}' http://10.0.2.15:8000/"), "200");
  auto served = [&] {
    auto log = inBox("b", "grep -c 'GET /' /tmp/server.log");
    return log.exit_code == 0 ? std::stoi(log.out) : -1;
  };
  ASSERT_EQ(served(), 2);

  // From a: b's address (which is a's own), the gateway, names that resolve to them, through
  // the transparent path and the explicit proxy, plain and CONNECT.
  EXPECT_EQ(curl("a", "http://api.example.test/"), "hello from api.example.test\n");
  for (const std::string& target :
       {std::string("http://10.0.2.15:8000/"), std::string("http://10.0.2.2:8000/"),
        std::string("http://b.example.test:8000/"),
        std::string("http://gateway.example.test:8000/"),
        std::string("-k https://b.example.test:8000/"),
        std::string("-x http://10.0.2.2:3128 http://b.example.test:8000/"),
        std::string("-x http://10.0.2.2:3128 http://10.0.2.15:8000/"),
        std::string("-p -x http://10.0.2.2:3128 http://b.example.test:8000/"),
        std::string("-p -x http://10.0.2.2:3128 http://gateway.example.test:8000/")}) {
    EXPECT_EQ(curl("a", "-o /dev/null -w '%{http_code}' " + target), "") << target;
  }
  EXPECT_EQ(served(), 2) << "a request from a reached b's server";
  json log = policyLog("a");
  EXPECT_TRUE(refusedFor(log, "b.example.test", "10.0.2.15 (private (RFC 1918))")) << log.dump(1);
  EXPECT_TRUE(refusedFor(log, "gateway.example.test", "private (RFC 1918)")) << log.dump(1);

  // And structurally: a's namespace holds lo and tap0 and nothing else, its only addresses
  // are loopback and the gateway's, and no route leads past the gateway's own subnet.
  std::string ns = boxNetns(d().inspect("a"));
  ASSERT_FALSE(ns.empty());
  EXPECT_NE(ns, boxNetns(d().inspect("b")));
  auto links = sys::runCapture({"ip", "-n", ns, "-o", "link", "show"});
  ASSERT_TRUE(links) << links.error().describe();
  std::vector<std::string> names;
  std::istringstream link_lines(*links);
  for (std::string line; std::getline(link_lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex("^[0-9]+: ([^:@]+)"))) names.push_back(m[1]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"lo", "tap0"})) << *links;
  auto addresses = sys::runCapture({"ip", "-n", ns, "-o", "-4", "addr", "show"});
  ASSERT_TRUE(addresses);
  std::vector<std::string> v4;
  std::istringstream addr_lines(*addresses);
  for (std::string line; std::getline(addr_lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex("inet ([0-9./]+)"))) v4.push_back(m[1]);
  }
  EXPECT_EQ(v4, (std::vector<std::string>{"127.0.0.1/8", "10.0.2.2/24"})) << *addresses;
  auto main_routes = sys::runCapture({"ip", "-n", ns, "-4", "route", "show"});
  ASSERT_TRUE(main_routes);
  std::vector<std::string> routes;
  std::istringstream main_lines(*main_routes);
  for (std::string line; std::getline(main_lines, line);) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    routes.push_back(line);
  }
  EXPECT_EQ(routes,
            (std::vector<std::string>{"10.0.2.0/24 dev tap0 proto kernel scope link src 10.0.2.2"}))
      << *main_routes;
  for (const char* family : {"-4", "-6"}) {
    auto all = sys::runCapture({"ip", "-n", ns, family, "route", "show", "table", "all"});
    ASSERT_TRUE(all);
    std::istringstream route_lines(*all);
    for (std::string line; std::getline(route_lines, line);) {
      EXPECT_EQ(line.find("default"), std::string::npos) << line;
      EXPECT_EQ(line.find(" via "), std::string::npos) << line;
      bool own_device = line.find(" dev lo ") != std::string::npos ||
                        line.find(" dev tap0 ") != std::string::npos;
      EXPECT_TRUE(own_device) << line;
    }
  }
}

TEST_F(NetworkTest, HostServicesMetadataAndPrivateAddressesAreRefusedWhateverNamesSay) {
  // allow-all: every name is allowed, so only the address filter stands between the box and
  // live listeners on the metadata address, the host's loopback and address, and a LAN.
  ASSERT_EQ(d().hutch({"run", "--name", "a", "--network-policy", "allow-all"}).exit_code, 0);
  EXPECT_EQ(curl("a", "http://api.example.test/"), "hello from api.example.test\n");
  struct Target {
    std::string host_port;
    std::string why;  // in the log entry's reason
  };
  for (const Target& t :
       {Target{"metadata.example.test:80", "169.254.169.254 (cloud metadata)"},
        Target{"loopback.example.test:18080", "127.0.0.1 (loopback)"},
        Target{"host.example.test:18080", "198.51.100.1 (an address of this host)"},
        Target{"lan.example.test:80", "192.168.213.2 (private (RFC 1918))"}}) {
    for (const std::string& how : {std::string("http://"), std::string("-k https://"),
                                   std::string("-x http://10.0.2.2:3128 http://"),
                                   std::string("-p -x http://10.0.2.2:3128 http://")}) {
      EXPECT_EQ(curl("a", "-o /dev/null -w '%{http_code}' " + how + t.host_port + "/"), "")
          << how << t.host_port << " was reachable";
    }
    std::string host = t.host_port.substr(0, t.host_port.find(':'));
    json log = policyLog("a");
    EXPECT_TRUE(refusedFor(log, host, t.why)) << host << ": " << log.dump(1);
  }
  // Raw addresses are refused before any name is looked up.
  for (const char* raw : {"http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:18080/",
                          "http://198.51.100.1:18080/", "http://192.168.213.2/"}) {
    EXPECT_EQ(curl("a", raw), "") << raw;
  }
  EXPECT_EQ(world_->metadata().accepted(), 0) << "a box reached the metadata address";
  EXPECT_EQ(world_->hostService().accepted(), 0) << "a box reached a service on the host";
  EXPECT_EQ(world_->lan().accepted(), 0) << "a box reached a private network";

  // A policy may open a private network (a LAN mirror), and nothing but private networks.
  std::string lan = policyFile("lan", {{"allow", {{{"domain", "lan.example.test"}}}},
                                       {"allow_private", {"192.168.213.0/24"}}});
  auto set = d().hutch({"policy", "set", "a", lan});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("192.168.213.0/24"), std::string::npos) << set.out;
  EXPECT_EQ(curl("a", "http://lan.example.test/"), "hello from lan.example.test\n");
  EXPECT_EQ(world_->lan().accepted(), 1);
  std::string metadata = policyFile(
      "metadata", {{"allow", {{{"domain", "*"}}}}, {"allow_private", {"169.254.169.254"}}});
  auto bad = d().hutch({"policy", "set", "a", metadata});
  EXPECT_EQ(bad.exit_code, 64) << bad.err;
  EXPECT_NE(bad.err.find("is not inside a private range"), std::string::npos) << bad.err;
  EXPECT_EQ(world_->metadata().accepted(), 0);
}

TEST_F(NetworkTest, WhatIsNeitherTcpNorDnsIsDroppedAndLoggedAndTheLogFollows) {
  std::string policy = policyFile("api", {{"allow", {{{"domain", "api.example.test"}}}}});
  ASSERT_EQ(d().hutch({"run", "--name", "drops", "--network-policy", policy}).exit_code, 0);
  EXPECT_EQ(curl("drops", "http://api.example.test/first"), "hello from api.example.test\n");

  // `policy log -f` streams: it prints what is there, then what comes.
  fs::path out = d().dir() / "follow.out";
  fs::path err = d().dir() / "follow.err";
  pid_t follow = d().start({"--json", "policy", "log", "-f", "drops"}, out, err);
  ASSERT_GT(follow, 0);
  auto followed = [&](const std::function<bool(const json&)>& match) {
    for (int i = 0; i < 100; ++i) {
      for (const auto& e : parseLines(readFile(out))) {
        if (match(e)) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  };
  auto isHttp = [](const json& e) {
    return e.value("host", "") == "api.example.test" && e.value("proto", "") == "http";
  };
  ASSERT_TRUE(followed(isHttp)) << "-f did not print the existing entry: " << readFile(out);

  // A UDP datagram to a port other than 53 and a ping, from inside the box. The UDP listener
  // the datagram names exists (in the test's inet namespace) and gets nothing.
  auto udp = inBox("drops",
                   "python3 -c \"import socket; s = socket.socket(socket.AF_INET, "
                   "socket.SOCK_DGRAM); s.sendto(b'x', ('198.51.100.2', 9999))\"");
  EXPECT_EQ(udp.exit_code, 0) << udp.err;
  auto ping = d().hutch({"exec", "-u", "root", "drops", "--", "python3", "-c",
                         "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_RAW, "
                         "socket.IPPROTO_ICMP); s.sendto(bytes.fromhex('0800f7fe00010000'), "
                         "('198.51.100.2', 0))"});
  EXPECT_EQ(ping.exit_code, 0) << ping.err;
  auto isUdp = [](const json& e) {
    return e.value("proto", "") == "udp" && e.value("address", "") == "198.51.100.2" &&
           e.value("port", 0) == 9999 && e.value("decision", "") == "deny";
  };
  auto isPing = [](const json& e) {
    return e.value("proto", "") == "icmp" && e.value("address", "") == "198.51.100.2" &&
           e.value("decision", "") == "deny" &&
           e.value("reason", "").find("echo-request") != std::string::npos;
  };
  json udp_entry = waitForEntry("drops", isUdp);
  EXPECT_TRUE(udp_entry.is_object()) << policyLog("drops").dump(1);
  EXPECT_TRUE(waitForEntry("drops", isPing).is_object()) << policyLog("drops").dump(1);
  EXPECT_EQ(world_->udp().received(), 0) << "a UDP datagram left the box";
  auto table = d().hutch({"policy", "log", "drops"});
  EXPECT_NE(table.out.find("udp     deny  198.51.100.2:9999"), std::string::npos) << table.out;

  // A new request shows up in the running -f, after the entries it had printed.
  EXPECT_EQ(curl("drops", "http://api.example.test/second"), "hello from api.example.test\n");
  EXPECT_TRUE(followed(isUdp)) << readFile(out);
  bool streamed = false;
  for (int i = 0; i < 100 && !streamed; ++i) {
    json lines = parseLines(readFile(out));
    streamed = std::count_if(lines.begin(), lines.end(), isHttp) >= 2;
    if (!streamed) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(streamed) << "-f did not print the second request: " << readFile(out);
  ::kill(follow, SIGTERM);
  CommandResult ended = collect(follow, out, err);
  EXPECT_EQ(ended.exit_code, 128 + SIGTERM) << "-f was still following: " << ended.err;
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
  // name and sends the real key upstream. The upstream echoes the header it got; the box sees
  // the placeholder there. Both the placeholder and the response headers go to the box's disk.
  EXPECT_EQ(curl("agent",
                 "-D /home/hutch/headers.txt -H \"Authorization: Bearer $API_KEY\" "
                 "https://api.example.test/auth"),
            "authorized\n");
  bool upstream_saw_key = false;
  for (const auto& head : world_->https().heads()) {
    upstream_saw_key = upstream_saw_key || head.find(kRealKey) != std::string::npos;
  }
  EXPECT_TRUE(upstream_saw_key);
  auto headers = inBox("agent", "cat /home/hutch/headers.txt");
  EXPECT_NE(headers.out.find("X-Echo-Authorization: Bearer " + placeholder), std::string::npos)
      << headers.out;

  // Host and SNI disagree: refused before anything reaches the server.
  size_t heads = world_->https().heads().size();
  EXPECT_EQ(curl("agent", "-H 'Host: other.example.test' https://api.example.test/auth"), "");
  EXPECT_EQ(world_->https().heads().size(), heads);

  // A process that keeps the environment in the box's memory, and the placeholder on its disk.
  ASSERT_EQ(d().hutch({"exec", "-d", "agent", "--", "sleep", "3600"}).exit_code, 0);
  ASSERT_EQ(inBox("agent", "printenv API_KEY > /home/hutch/key.txt; sync").exit_code, 0);

  // The box's environment: every process's.
  auto all_env = inBox("agent", "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env");
  EXPECT_EQ(all_env.out.find(kRealKey), std::string::npos);
  EXPECT_NE(all_env.out.find(placeholder), std::string::npos);

  // The box's guest RAM, read from its QEMU while it runs.
  json box = d().inspect("agent");
  auto ram = guestRamHolds(box.value("pid", int64_t{0}), box.value("memory_mib", uint64_t{512}),
                           {kRealKey, placeholder});
  EXPECT_FALSE(ram[0]) << "the real key is in the box's memory";
  EXPECT_TRUE(ram[1]) << "the search did not find the placeholder in the box's memory";

  // The box's disk: its writable overlay and every layer below it in the state directory (the
  // template's base image below them is read-only and shared).
  fs::path box_dir = d().stateDir() / "boxes" / box.value("id", "");
  std::vector<fs::path> disk;
  for (const auto& entry : fs::directory_iterator(box_dir)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("disk") && name.ends_with(".qcow2")) disk.push_back(entry.path());
  }
  ASSERT_FALSE(disk.empty()) << "no overlay in " << box_dir;
  std::vector<fs::path> chain;
  for (const auto& top : disk) {
    auto info = sys::runCapture(
        {"qemu-img", "info", "-U", "--backing-chain", "--output=json", top.string()});
    ASSERT_TRUE(info) << info.error().describe();
    for (const auto& layer : json::parse(*info)) {
      fs::path file = layer.value("filename", "");
      if (file.string().starts_with(d().stateDir().string()) &&
          std::find(chain.begin(), chain.end(), file) == chain.end()) {
        chain.push_back(file);
      }
    }
  }
  bool disk_has_placeholder = false;
  for (const auto& file : chain) {
    EXPECT_FALSE(fileContains(file, kRealKey)) << "the real key is on the box's disk: " << file;
    disk_has_placeholder = disk_has_placeholder || fileContains(file, placeholder);
  }
  EXPECT_TRUE(disk_has_placeholder) << "the search did not find the placeholder on the disk";

  // And nowhere else hutch keeps files or logs but the secret store.
  auto key_hits = sys::runCapture({"grep", "-rlaF", "-D", "skip", kRealKey, d().stateDir().string(),
                                   (d().dir() / "hutchd.log").string()});
  // grep exits 1 when nothing matches: runCapture reports that as an error.
  std::string hits = key_hits ? *key_hits : "";
  EXPECT_EQ(hits, (d().stateDir() / "secrets" / "API_KEY.json").string() + "\n")
      << "the real key is in these files besides the secret store";
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
  // Its dropped packets are logged again too (the new hutch-egress got the same NFLOG socket).
  auto dropUdp = [&](uint16_t port) {
    auto sent = inBox("s",
                      "python3 -c \"import socket; s = socket.socket(socket.AF_INET, "
                      "socket.SOCK_DGRAM); s.sendto(b'x', ('198.51.100.2', " +
                          std::to_string(port) + "))\"");
    EXPECT_EQ(sent.exit_code, 0) << sent.err;
    return waitForEntry("s",
                        [port](const json& e) {
                          return e.value("proto", "") == "udp" && e.value("port", 0) == port;
                        })
        .is_object();
  };
  EXPECT_TRUE(dropUdp(7001)) << policyLog("s").dump(1);

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
  EXPECT_EQ(curl("s", "--resolve other.example.test:80:198.51.100.2 http://other.example.test/"),
            "");
  EXPECT_TRUE(dropUdp(7002)) << "no drop log after hutchd's restart: " << policyLog("s").dump(1);
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

// A Dockerfile build's RUN steps use host secrets as a box does (the placeholder in their
// environment, the key sent upstream by hutch-egress); the template keeps none of it: no
// secret in its boxes' environment, the build box's CA gone from its trust store, byte for byte.
TEST_F(NetworkTest, ABuildUsesHostSecretsAndItsTemplateKeepsNoneOfThem) {
  auto set = d().hutch({"secret", "set", "--domain", "api.example.test", "--header",
                        "Authorization", "--format", "Bearer {value}", "API_KEY"},
                       std::string(kRealKey) + "\n", true);
  ASSERT_EQ(set.exit_code, 0) << set.err;
  std::string policy = policyFile("build", {{"allow", {{{"domain", "api.example.test"}}}}});
  fs::path context = world_->dir() / "context";
  fs::create_directories(context);
  std::ofstream(context / "Dockerfile")
      << "FROM base\n"
         "RUN test -f /usr/local/share/ca-certificates/hutch-box-ca.crt && printenv API_KEY > "
         "/placeholder.txt && curl -fsS --max-time 20 -H \"Authorization: Bearer $API_KEY\" "
         "https://api.example.test/auth > /answer.txt\n";
  auto build = [&](const std::string& name, const std::string& secret) {
    return d().hutch({"template", "build", name, "-f", (context / "Dockerfile").string(),
                      context.string(), "--network-policy", policy, "--secret", secret, "--memory",
                      "512m", "--cpus", "1", "--disk", "2g"});
  };
  auto built = build("keyed", "API_KEY");
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
  EXPECT_NE(built.err.find("uses host secrets (API_KEY): every step runs"), std::string::npos)
      << built.err;
  bool upstream_saw_key = false;
  for (const auto& head : world_->https().heads()) {
    upstream_saw_key = upstream_saw_key || head.find(kRealKey) != std::string::npos;
  }
  EXPECT_TRUE(upstream_saw_key) << "the build's request did not reach the upstream with the key";

  ASSERT_EQ(d().hutch({"run", "--name", "k", "--template", "keyed"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"run", "--name", "plain"}).exit_code, 0);
  const std::string look =
      "cat /answer.txt 2>/dev/null; printenv API_KEY || echo no secret; "
      "ls /usr/local/share/ca-certificates/ /etc/ssl/certs/ 2>/dev/null | grep -c hutch; "
      "b=/etc/ssl/certs/ca-certificates.crt; wc -c < $b; grep -c BEGIN $b; sha256sum < $b; "
      "tail -c 100 $b | od -c | tail -3";
  auto keyed = inBox("k", look);
  auto plain = inBox("plain", look);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(keyed.out, "authorized\n" + plain.out) << "plain: " << plain.out;
  EXPECT_EQ(inBox("k", "cut -c1-21 /placeholder.txt").out, "hutch-secret-API_KEY-\n");

  // A secret the caller does not have: refused with what to do, nothing left behind.
  auto missing = build("nokey", "NOPE");
  EXPECT_EQ(missing.exit_code, 66) << missing.err;
  EXPECT_NE(missing.err.find("hutch secret set NOPE"), std::string::npos) << missing.err;
  EXPECT_EQ(d().hutch({"template", "ls"}).out.find("nokey"), std::string::npos);
  auto two = build("nokey", "API_KEY,OTHER");
  EXPECT_EQ(two.exit_code, 64) << two.err;
  EXPECT_NE(two.err.find("repeat --secret"), std::string::npos) << two.err;
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
  // The URI decides, and the URI's host is what the upstream is told: a Host header naming
  // another site does not reach it.
  EXPECT_EQ(curl("f",
                 "-x http://10.0.2.2:3128 -H 'Host: other.example.test' "
                 "http://api.example.test/vhost"),
            "hello from api.example.test\n");
  auto heads = world_->http().heads();
  ASSERT_FALSE(heads.empty());
  EXPECT_NE(heads.back().find("\r\nHost: api.example.test\r\n"), std::string::npos) << heads.back();
  EXPECT_EQ(heads.back().find("other.example.test"), std::string::npos) << heads.back();
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
  // A secret bound to every name, or to every name of a top-level domain, would go anywhere.
  for (const char* broad : {"*", "*.test", "*.COM"}) {
    auto everywhere = d().hutch({"secret", "set", "--domain", broad, "K"}, "v\n", true);
    EXPECT_EQ(everywhere.exit_code, 64) << broad << ": " << everywhere.err;
    EXPECT_NE(everywhere.err.find("would send the secret to every"), std::string::npos)
        << everywhere.err;
  }
  auto listed = d().hutch({"--json", "secret", "ls"});
  EXPECT_EQ(listed.out, "[]\n") << listed.out;

  ASSERT_EQ(d().hutch({"run", "--name", "y"}).exit_code, 0);
  auto set = d().hutch({"policy", "set", "y", bad});
  EXPECT_EQ(set.exit_code, 64) << set.err;
  auto kept = d().hutch({"--json", "policy", "show", "y"});
  EXPECT_EQ(json::parse(kept.out)["policy"]["allow"], json::array()) << kept.out;
  EXPECT_EQ(d().hutch({"policy", "show", "nosuchbox"}).exit_code, 66);
}

// The npm and pypi presets allow what the host's npm and pip are configured to reach: here
// hutchd's environment points npm at api.example.test and pip at other.example.test (both on the
// test's stand-in internet), as npm_config_registry and PIP_INDEX_URL do on any host.
TEST_F(NetworkTest, TheNpmAndPypiPresetsAllowTheRegistriesTheHostUses) {
  if (std::system("command -v npm >/dev/null") != 0) GTEST_SKIP() << "no npm on this host";
  ::setenv("npm_config_registry", "http://api.example.test/", 1);
  ::setenv("PIP_INDEX_URL", "http://other.example.test/simple/", 1);
  d().crashAndRestart();  // the new hutchd has that environment
  ::unsetenv("npm_config_registry");
  ::unsetenv("PIP_INDEX_URL");

  ASSERT_EQ(d().hutch({"run", "--name", "reg", "--network-policy", "npm"}).exit_code, 0);
  auto shown = d().hutch({"policy", "show", "reg"});
  EXPECT_NE(shown.out.find("api.example.test:80"), std::string::npos) << shown.out;
  EXPECT_EQ(curl("reg", "http://api.example.test/"), "hello from api.example.test\n");
  EXPECT_EQ(curl("reg", "http://other.example.test/"), "");

  ASSERT_EQ(d().hutch({"policy", "set", "reg", "pypi"}).exit_code, 0);
  EXPECT_EQ(curl("reg", "http://other.example.test/simple/"), "hello from other.example.test\n");
  EXPECT_EQ(curl("reg", "http://api.example.test/"), "");
  EXPECT_TRUE(logged(policyLog("reg"), "api.example.test", "deny")) << policyLog("reg").dump(1);

  std::string both = policyFile("both", {{"presets", {"npm", "pypi"}}});
  ASSERT_EQ(d().hutch({"policy", "set", "reg", both}).exit_code, 0);
  EXPECT_EQ(curl("reg", "http://api.example.test/"), "hello from api.example.test\n");
  EXPECT_EQ(curl("reg", "http://other.example.test/"), "hello from other.example.test\n");
}

}  // namespace
}  // namespace hutch::e2e

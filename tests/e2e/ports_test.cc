// Published ports (hutch port, run -p) and detached processes (exec -d, procs, kill, logs
// --exec) on real boxes of the base image: servers in the box are reached from the host over
// the agent channel.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <map>
#include <random>
#include <thread>

#include "harness.h"
#include "tcp_client.h"

namespace hutch::e2e {
namespace {

// An echo server on 127.0.0.1:PORT in the box: echoes until end-of-file, then half-closes.
std::vector<std::string> echoServer(uint16_t port) {
  return {"python3", "-c",
          "import socketserver\n"
          "class H(socketserver.BaseRequestHandler):\n"
          "  def handle(self):\n"
          "    while True:\n"
          "      d = self.request.recv(65536)\n"
          "      if not d: break\n"
          "      self.request.sendall(d)\n"
          "    self.request.shutdown(1)\n"
          "socketserver.ThreadingTCPServer.allow_reuse_address = True\n"
          "socketserver.ThreadingTCPServer.request_queue_size = 128\n"
          "socketserver.ThreadingTCPServer(('127.0.0.1', " +
              std::to_string(port) + "), H).serve_forever()\n"};
}

// A connected socket to address:port (an IPv4 literal), or -1. tcp_client.h covers 127.0.0.1.
int connectTo(const std::string& address, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{.tv_sec = 120, .tv_usec = 0};  // a hang fails the test instead of blocking it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

// GET / over HTTP/1.0 on address:port: the whole answer, or nullopt if the connection failed.
std::optional<std::string> httpGetAt(const std::string& address, uint16_t port) {
  int fd = connectTo(address, port);
  if (fd < 0) return std::nullopt;
  const std::string request = "GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return std::nullopt;
  }
  std::string answer;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (n < 0) return std::nullopt;
  return answer;
}

std::string randomBytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(gen());
  return out;
}

class PortsTest : public ::testing::Test {
 protected:
  void SetUp() override { daemon_ = std::make_unique<Daemon>(); }
  void TearDown() override { daemon_.reset(); }
  Daemon& d() { return *daemon_; }

  nlohmann::json ports(const std::string& box) {
    auto r = d().hutch({"--json", "port", "ls", box});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }

  // The box's detached processes (hutch procs --json); an empty array if that failed.
  nlohmann::json procs(const std::string& box) {
    auto r = d().hutch({"--json", "procs", box});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_array() ? j : nlohmann::json::array();
  }

  // Polls the listing until process `id` has ended; its entry (null if it never did).
  nlohmann::json waitEnded(const std::string& box, const std::string& id) {
    for (int i = 0; i < 200; ++i) {
      for (const auto& p : procs(box)) {
        if (p.value("id", "") == id && !p.value("running", true)) return p;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return nullptr;
  }

  // Starts the box's HTTP server (serving ~/site) detached; returns its process id.
  std::string startHttp(const std::string& box, uint16_t port) {
    auto site = d().hutch({"exec", box, "--", "sh", "-c",
                           "mkdir -p site && echo 'hello through a port' > site/index.html"});
    EXPECT_EQ(site.exit_code, 0) << site.err;
    auto r = d().hutch({"exec", "-d", "-w", "/home/hutch/site", box, "--", "python3", "-m",
                        "http.server", "--bind", "127.0.0.1", std::to_string(port)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }

  std::unique_ptr<Daemon> daemon_;
};

TEST_F(PortsTest, HttpEchoAndFiftyParallelConnections) {
  uint16_t http = freePort();
  uint16_t echo = freePort();
  auto run = d().hutch({"run", "--name", "web", "-p", std::to_string(http) + ":8000", "-p",
                        "127.0.0.1:" + std::to_string(echo) + ":7000"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  startHttp("web", 8000);
  std::vector<std::string> exec{"exec", "-d", "web", "--"};
  auto server = echoServer(7000);
  exec.insert(exec.end(), server.begin(), server.end());
  ASSERT_EQ(d().hutch(exec).exit_code, 0);

  auto page = waitForHttp(http, "/index.html", "hello through a port");
  ASSERT_TRUE(page) << "no answer through the published port";
  EXPECT_NE(page->find("HTTP/1.0 200"), std::string::npos) << *page;
  EXPECT_NE(page->find("hello through a port"), std::string::npos) << *page;

  // Raw TCP: wait until the echo server listens, then 1 MiB byte-exact, then 50 at once.
  std::optional<std::string> probe;
  for (int i = 0; i < 120 && !(probe = roundTrip(echo, "ping")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_EQ(probe, "ping");
  std::string big = randomBytes(size_t{1} << 20, 1);
  auto back = roundTrip(echo, big);
  ASSERT_TRUE(back);
  EXPECT_TRUE(*back == big) << "1 MiB echo differs (" << back->size() << " bytes back)";

  constexpr int kConnections = 50;
  std::vector<std::future<bool>> results;
  for (int i = 0; i < kConnections; ++i) {
    results.push_back(std::async(std::launch::async, [echo, i] {
      std::string data = randomBytes(64 * 1024 + static_cast<size_t>(i) * 1000, 100 + i);
      auto got = roundTrip(echo, data);
      return got && *got == data;
    }));
  }
  int good = 0;
  for (auto& r : results) good += r.get() ? 1 : 0;
  EXPECT_EQ(good, kConnections);

  auto listed = ports("web");
  ASSERT_EQ(listed.size(), 2u) << listed.dump();
  for (const auto& p : listed) {
    EXPECT_TRUE(p.value("listening", false)) << p.dump();
    EXPECT_EQ(p.value("address", ""), "127.0.0.1");
  }
  // The listing is ordered by host port, which freePort() picks at random: find the echo one.
  auto echo_port = std::find_if(listed.begin(), listed.end(),
                                [](const auto& p) { return p.value("box_port", 0) == 7000; });
  ASSERT_NE(echo_port, listed.end()) << listed.dump();
  EXPECT_GE(echo_port->value("accepted", 0), kConnections + 2) << listed.dump();

  // Nothing listens on the box port: hutchd accepts, the agent cannot connect in the box, and
  // the host client's connection is reset. hutchd lives on and the other ports still work.
  uint16_t closed = freePort();
  auto none = d().hutch({"port", "web", std::to_string(closed) + ":9"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  int fd = connectLocal(closed);
  ASSERT_GE(fd, 0) << "the published port does not accept connections";
  char byte = 0;
  errno = 0;
  const ssize_t got = ::recv(fd, &byte, 1, 0);
  const int recv_errno = errno;
  ::close(fd);
  EXPECT_EQ(got, -1) << "expected a reset, got " << got << " byte(s) or end-of-file";
  EXPECT_EQ(recv_errno, ECONNRESET) << std::strerror(recv_errno);
  EXPECT_TRUE(processAlive(d().pid())) << "hutchd died";
  EXPECT_EQ(roundTrip(echo, "still relaying"), "still relaying");
  auto page_again = httpGet(http, "/index.html");
  ASSERT_TRUE(page_again);
  EXPECT_NE(page_again->find("hello through a port"), std::string::npos) << *page_again;
  EXPECT_EQ(ports("web").size(), 3u);
}

TEST_F(PortsTest, PortInUseIsAClearErrorAndNothingIsRecorded) {
  uint16_t busy = freePort();
  int holder = listenLocal(busy);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(d().hutch({"run", "--name", "b"}).exit_code, 0);
  auto r = d().hutch({"port", "b", std::to_string(busy) + ":80"});
  EXPECT_EQ(r.exit_code, 73) << r.err;
  EXPECT_NE(r.err.find("port " + std::to_string(busy) + " on 127.0.0.1: it is in use"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(ports("b").empty());

  // run -p with a busy port: an error, and no box is left behind. (Not a name that could be a
  // prefix of box b's id: inspect takes those too.)
  auto run = d().hutch({"run", "--name", "busy-port", "-p", std::to_string(busy) + ":80"});
  EXPECT_EQ(run.exit_code, 73) << run.err;
  EXPECT_NE(run.err.find("in use"), std::string::npos) << run.err;
  EXPECT_EQ(d().hutch({"inspect", "busy-port"}).exit_code, 66) << run.err;
  ::close(holder);

  // Two boxes cannot publish the same host port; bad specs are refused before anything runs.
  uint16_t port = freePort();
  ASSERT_EQ(d().hutch({"port", "b", std::to_string(port) + ":80"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"run", "--name", "other"}).exit_code, 0);
  auto taken = d().hutch({"port", "other", std::to_string(port) + ":80"});
  EXPECT_EQ(taken.exit_code, 73) << taken.err;
  EXPECT_NE(taken.err.find("box b publishes it"), std::string::npos) << taken.err;
  EXPECT_EQ(d().hutch({"port", "other", "80:70000"}).exit_code, 64);
  EXPECT_EQ(d().hutch({"port", "other", "nonsense"}).exit_code, 64);
  EXPECT_EQ(d().hutch({"port", "other", "8080:80/udp"}).exit_code, 69);
  EXPECT_TRUE(ports("other").empty());
}

TEST_F(PortsTest, PortsFollowTheBoxThroughStopStartAndGoAwayWithIt) {
  uint16_t port = freePort();
  ASSERT_EQ(d().hutch({"run", "--name", "life"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"port", "life", std::to_string(port) + ":8000"}).exit_code, 0);
  startHttp("life", 8000);
  ASSERT_TRUE(waitForHttp(port, "/index.html", "hello through a port"));

  ASSERT_EQ(d().hutch({"stop", "life"}).exit_code, 0);
  EXPECT_LT(connectLocal(port), 0) << "the port stays open while the box is stopped";
  auto stopped = ports("life");
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_FALSE(stopped[0].value("listening", true));

  ASSERT_EQ(d().hutch({"start", "life"}).exit_code, 0);
  auto started = ports("life");
  ASSERT_EQ(started.size(), 1u) << started.dump();
  EXPECT_TRUE(started[0].value("listening", false)) << started.dump();
  startHttp("life", 8000);  // processes do not survive a stop; the forward does
  ASSERT_TRUE(waitForHttp(port, "/index.html", "hello through a port"));
  // A hutchd restart adopts the running box and listens again.
  d().crashAndRestart();
  ASSERT_TRUE(waitForHttp(port, "/index.html", "hello through a port", std::chrono::seconds(20)));

  // rm: the listener and the record go; the port is free for another box.
  ASSERT_EQ(d().hutch({"port", "rm", "life", std::to_string(port)}).exit_code, 0);
  EXPECT_LT(connectLocal(port), 0);
  ASSERT_EQ(d().hutch({"port", "life", std::to_string(port) + ":8000"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"rm", "-f", "life"}).exit_code, 0);
  EXPECT_LT(connectLocal(port), 0);
  ASSERT_EQ(d().hutch({"run", "--name", "next", "-p", std::to_string(port) + ":8000"}).exit_code,
            0);
  EXPECT_EQ(ports("next").size(), 1u);
}

TEST_F(PortsTest, DetachedProcessesListKillAndLogs) {
  ASSERT_EQ(d().hutch({"run", "--name", "bg"}).exit_code, 0);
  auto started = d().hutch(
      {"exec", "-d", "bg", "--", "sh", "-c", "echo out-line; echo err-line >&2; exec sleep 1000"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  std::string id = started.out.substr(0, started.out.find('\n'));
  ASSERT_EQ(id.size(), 8u) << started.out;
  // The exec call returned while the process runs on.
  auto listed = nlohmann::json::parse(d().hutch({"--json", "procs", "bg"}).out, nullptr, false);
  ASSERT_TRUE(listed.is_array() && listed.size() == 1) << listed.dump();
  EXPECT_EQ(listed[0].value("id", ""), id);
  EXPECT_TRUE(listed[0].value("running", false));
  EXPECT_EQ(listed[0].value("user", ""), "hutch");

  std::string log;
  for (int i = 0; i < 40 && log.find("err-line") == std::string::npos; ++i) {
    log = d().hutch({"logs", "bg", "--exec", id}).out;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(log.find("out-line\n"), std::string::npos) << log;
  EXPECT_NE(log.find("err-line\n"), std::string::npos) << log;

  auto killed = d().hutch({"kill", "-s", "KILL", "bg", id});
  EXPECT_EQ(killed.exit_code, 0) << killed.err;
  auto after = waitEnded("bg", id);
  ASSERT_TRUE(after.is_object()) << "still running after SIGKILL: " << procs("bg").dump();
  EXPECT_EQ(after.value("signal", 0), 9) << after.dump();
  EXPECT_FALSE(after.contains("code")) << after.dump();
  // Its output outlives it.
  auto log_after = d().hutch({"logs", "bg", "--exec", id});
  EXPECT_EQ(log_after.exit_code, 0) << log_after.err;
  EXPECT_NE(log_after.out.find("out-line\n"), std::string::npos) << log_after.out;
  EXPECT_NE(log_after.out.find("err-line\n"), std::string::npos) << log_after.out;

  // One that ends by itself: its exit code is listed, its whole output still readable.
  auto quick = d().hutch({"exec", "-d", "bg", "--", "sh", "-c",
                          "for i in 1 2 3; do echo line-$i; done; echo last-words >&2; exit 7"});
  ASSERT_EQ(quick.exit_code, 0) << quick.err;
  std::string quick_id = quick.out.substr(0, quick.out.find('\n'));
  auto ended = waitEnded("bg", quick_id);
  ASSERT_TRUE(ended.is_object()) << procs("bg").dump();
  EXPECT_EQ(ended.value("code", -1), 7) << ended.dump();
  EXPECT_FALSE(ended.contains("signal")) << ended.dump();
  auto quick_log = d().hutch({"logs", "bg", "--exec", quick_id});
  EXPECT_EQ(quick_log.exit_code, 0) << quick_log.err;
  EXPECT_NE(quick_log.out.find("line-1\nline-2\nline-3\n"), std::string::npos) << quick_log.out;
  EXPECT_NE(quick_log.out.find("last-words\n"), std::string::npos) << quick_log.out;
  EXPECT_EQ(procs("bg").size(), 2u);                       // both listed, both ended
  EXPECT_EQ(d().hutch({"kill", "bg", id}).exit_code, 65);  // it has ended
  EXPECT_EQ(d().hutch({"kill", "bg", "ffffffff"}).exit_code, 66);
  EXPECT_EQ(d().hutch({"kill", "-s", "NOPE", "bg", id}).exit_code, 64);
  EXPECT_EQ(d().hutch({"logs", "bg", "--exec", "ffffffff"}).exit_code, 66);
  auto service = d().hutch({"logs", "bg", "--service", "docker"});
  EXPECT_EQ(service.exit_code, 66);
  EXPECT_NE(service.err.find("no service 'docker'"), std::string::npos) << service.err;
  EXPECT_EQ(d().hutch({"exec", "-d", "-i", "bg", "--", "true"}).exit_code, 64);
}

TEST_F(PortsTest, AnAddressOtherThanTheDefaultIsBoundAsAsked) {
  ASSERT_EQ(d().hutch({"run", "--name", "addr"}).exit_code, 0);
  uint16_t everywhere = freePort();
  uint16_t second = freePort();
  auto all = d().hutch({"port", "addr", "0.0.0.0:" + std::to_string(everywhere) + ":8000"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(all.out, "0.0.0.0:" + std::to_string(everywhere) + " -> addr:8000\n");
  auto only = d().hutch({"port", "addr", "127.0.0.2:" + std::to_string(second) + ":8000"});
  ASSERT_EQ(only.exit_code, 0) << only.err;
  EXPECT_EQ(only.out, "127.0.0.2:" + std::to_string(second) + " -> addr:8000\n");

  auto listed = ports("addr");
  ASSERT_EQ(listed.size(), 2u) << listed.dump();
  std::map<uint16_t, std::string> addresses;
  for (const auto& p : listed) {
    EXPECT_TRUE(p.value("listening", false)) << p.dump();
    addresses[p.value("host_port", uint16_t{0})] = p.value("address", "");
  }
  EXPECT_EQ(addresses[everywhere], "0.0.0.0") << listed.dump();
  EXPECT_EQ(addresses[second], "127.0.0.2") << listed.dump();

  startHttp("addr", 8000);
  // 0.0.0.0 is every address: 127.0.0.1 and 127.0.0.2 both reach the box.
  ASSERT_TRUE(waitForHttp(everywhere, "/index.html", "hello through a port"));
  auto via_second = httpGetAt("127.0.0.2", everywhere);
  ASSERT_TRUE(via_second);
  EXPECT_NE(via_second->find("hello through a port"), std::string::npos) << *via_second;
  // 127.0.0.2 only: that address answers, the default one is not bound.
  auto bound = httpGetAt("127.0.0.2", second);
  ASSERT_TRUE(bound);
  EXPECT_NE(bound->find("hello through a port"), std::string::npos) << *bound;
  EXPECT_LT(connectLocal(second), 0) << "127.0.0.1 is bound too";

  // rm with the address: that port goes, the other stays.
  auto removed =
      d().hutch({"port", "rm", "--address", "127.0.0.2", "addr", std::to_string(second)});
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_LT(connectTo("127.0.0.2", second), 0);
  auto left = ports("addr");
  ASSERT_EQ(left.size(), 1u) << left.dump();
  EXPECT_EQ(left[0].value("address", ""), "0.0.0.0");
}

TEST_F(PortsTest, APublishedPortNeedsNoBoxNetwork) {
  daemon_.reset();
  daemon_ = std::make_unique<Daemon>(std::vector<std::string>{"--no-network"});
  uint16_t port = freePort();
  auto run = d().hutch({"run", "--name", "iso", "-p", std::to_string(port) + ":8000"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The box has no network interface but its loopback.
  auto nics = d().hutch({"exec", "iso", "--", "ls", "/sys/class/net"});
  ASSERT_EQ(nics.exit_code, 0) << nics.err;
  EXPECT_EQ(nics.out, "lo\n");
  startHttp("iso", 8000);
  auto page = waitForHttp(port, "/index.html", "hello through a port");
  ASSERT_TRUE(page) << "no answer through the published port";
  EXPECT_NE(page->find("hello through a port"), std::string::npos) << *page;
}

}  // namespace
}  // namespace hutch::e2e

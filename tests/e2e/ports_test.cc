// Published ports (hutch port, run -p) and detached processes (exec -d, procs, kill, logs
// --exec) on real boxes of the base image: servers in the box are reached from the host over
// the agent channel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <future>
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

  // Nothing listening in the box: the host client's connection is reset, hutchd lives on.
  auto none = d().hutch({"port", "web", std::to_string(freePort()) + ":9"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
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

  // run -p with a busy port: an error, and no box is left behind.
  auto run = d().hutch({"run", "--name", "c", "-p", std::to_string(busy) + ":80"});
  EXPECT_EQ(run.exit_code, 73) << run.err;
  EXPECT_NE(run.err.find("in use"), std::string::npos) << run.err;
  EXPECT_EQ(d().hutch({"inspect", "c"}).exit_code, 66);
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
  EXPECT_TRUE(ports("life")[0].value("listening", false));
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
  nlohmann::json after;
  for (int i = 0; i < 40; ++i) {
    after = nlohmann::json::parse(d().hutch({"--json", "procs", "bg"}).out, nullptr, false);
    if (!after[0].value("running", true)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(after[0].value("running", true)) << after.dump();
  EXPECT_EQ(after[0].value("signal", 0), 9) << after.dump();
  EXPECT_EQ(d().hutch({"kill", "bg", id}).exit_code, 65);  // it has ended
  EXPECT_EQ(d().hutch({"kill", "bg", "ffffffff"}).exit_code, 66);
  EXPECT_EQ(d().hutch({"kill", "-s", "NOPE", "bg", id}).exit_code, 64);
  EXPECT_EQ(d().hutch({"logs", "bg", "--exec", "ffffffff"}).exit_code, 66);
  auto service = d().hutch({"logs", "bg", "--service", "docker"});
  EXPECT_EQ(service.exit_code, 66);
  EXPECT_NE(service.err.find("no service 'docker'"), std::string::npos) << service.err;
  EXPECT_EQ(d().hutch({"exec", "-d", "-i", "bg", "--", "true"}).exit_code, 64);
}

}  // namespace
}  // namespace hutch::e2e

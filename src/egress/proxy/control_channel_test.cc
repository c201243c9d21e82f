// The control protocol (README.md) over a SOCK_SEQPACKET socketpair: in process against
// ControlChannel, and against the real hutch-egress binary.
#include "egress/proxy/control_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/read.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "egress/proxy/egress_proxy.h"
#include "egress/proxy/testing/tls_fixtures.h"

namespace hutch::egress::proxy {
namespace {

using Json = nlohmann::json;
using testing::IoThread;
using testing::TempFile;

UniqueFd listenTcp(uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  EXPECT_EQ(::listen(fd.get(), 16), 0);
  socklen_t len = sizeof sin;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sin), &len);
  port = ntohs(sin.sin_port);
  return fd;
}

UniqueFd bindUdp() {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  return fd;
}

// Sends one message; false when the kernel refuses its size (EMSGSIZE).
bool sendMessage(int fd, const std::string& text, const std::vector<int>& fds = {}) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  if (n < 0 && errno == EMSGSIZE) return false;
  EXPECT_EQ(n, static_cast<ssize_t>(text.size())) << std::strerror(errno);
  return true;
}

// The next event, waiting up to 5 s; null on timeout or close.
Json receive(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<char> buffer(1 << 20);
  ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
  if (n <= 0) return nullptr;
  return Json::parse(std::string(buffer.data(), static_cast<size_t>(n)));
}

// Events until one named `name` (others, like DNS or proxy logs, are skipped).
Json receiveEvent(int fd, const std::string& name) {
  for (int i = 0; i < 50; ++i) {
    Json event = receive(fd);
    if (event.is_null()) return event;
    if (event.value("event", "") == name) return event;
  }
  return nullptr;
}

Json boxMessage(const std::string& id, const CaPair& ca) {
  Policy policy;
  policy.allow.push_back(Rule{"allowed.example.test", {443}});
  return {{"op", "box"},
          {"id", id},
          {"policy", toJson(policy)},
          {"secrets", Json::array({{{"name", "token"},
                                    {"value", "v"},
                                    {"domains", {"allowed.example.test"}},
                                    {"header", "Authorization"},
                                    {"format", "Bearer {value}"},
                                    {"placeholder", "P"}}})},
          {"ca", {{"cert", ca.cert}, {"key", ca.key}}}};
}

// A CONNECT to `authority` through the explicit proxy on `port`; the status line's code.
unsigned connectThrough(uint16_t port, const std::string& authority) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  std::string request = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
  asio::write(socket, asio::buffer(request));
  beast::flat_buffer buffer;
  http::response_parser<http::empty_body> parser;
  parser.skip(true);
  http::read_header(socket, buffer, parser);
  return parser.get().result_int();
}

class ControlChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
    hutchd_.reset(pair[0]);
    auto ca = makeBoxCa("b1");
    ASSERT_TRUE(ca);
    ca_ = *ca;
    io_.run([&] {
      channel_ = std::make_unique<ControlChannel>(io_.io().get_executor(), UniqueFd(pair[1]));
      ProxyOptions options;
      options.log = [this](const LogEntry& e) { channel_->sendLog(e); };
      options.dns_upstreams = {asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 9)};
      auto proxy = EgressProxy::create(io_.io(), std::move(options));
      ASSERT_TRUE(proxy);
      proxy_ = std::move(*proxy);
      asio::co_spawn(io_.io(), channel_->run(*proxy_),
                     [this](std::exception_ptr) { ended_ = true; });
    });
  }
  void TearDown() override {
    hutchd_.reset();
    for (int i = 0; i < 100 && !ended_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(ended_);
    io_.run([this] {
      proxy_.reset();
      channel_.reset();
    });
  }

  IoThread io_;
  UniqueFd hutchd_;
  CaPair ca_;
  std::unique_ptr<ControlChannel> channel_;
  std::unique_ptr<EgressProxy> proxy_;
  std::atomic<bool> ended_{false};
};

TEST_F(ControlChannelTest, SaysReadyFirst) {
  EXPECT_EQ(receive(hutchd_.get()), Json({{"event", "ready"}}));
}

TEST_F(ControlChannelTest, ABoxMessageWithItsSocketsStartsTheProxy) {
  ASSERT_EQ(receive(hutchd_.get())["event"], "ready");
  uint16_t explicit_port = 0;
  uint16_t transparent_port = 0;
  UniqueFd a = listenTcp(explicit_port);
  UniqueFd b = listenTcp(transparent_port);
  UniqueFd c = bindUdp();
  sendMessage(hutchd_.get(), boxMessage("b1", ca_).dump(), {a.get(), b.get(), c.get()});
  // hutch-egress has its own copies now; ours would keep the listener open after removal.
  a.reset();
  b.reset();
  c.reset();
  EXPECT_EQ(connectThrough(explicit_port, "denied.example.test:443"), 403u);
  Json event = receiveEvent(hutchd_.get(), "log");
  ASSERT_TRUE(event.is_object());
  EXPECT_EQ(event["entry"]["box"], "b1");
  EXPECT_EQ(event["entry"]["host"], "denied.example.test");
  EXPECT_EQ(event["entry"]["decision"], "deny");
  // A live policy change through the channel.
  Policy all;
  all.allow.push_back(Rule{"*", {}});
  all.deny.push_back(Rule{"other.example.test", {}});
  sendMessage(hutchd_.get(), Json{{"op", "policy"}, {"id", "b1"}, {"policy", toJson(all)}}.dump());
  EXPECT_EQ(connectThrough(explicit_port, "other.example.test:443"), 403u);
  event = receiveEvent(hutchd_.get(), "log");
  EXPECT_EQ(event["entry"]["reason"], "denied by other.example.test");
  // The same id again without descriptors keeps the sockets.
  sendMessage(hutchd_.get(), boxMessage("b1", ca_).dump());
  EXPECT_EQ(connectThrough(explicit_port, "denied.example.test:443"), 403u);
  EXPECT_EQ(receiveEvent(hutchd_.get(), "log")["entry"]["reason"], "no allow rule matches");
  // Removal closes the listener.
  sendMessage(hutchd_.get(), Json{{"op", "remove"}, {"id", "b1"}}.dump());
  sendMessage(hutchd_.get(), Json{{"op", "remove"}, {"id", "b1"}}.dump());
  Json error = receiveEvent(hutchd_.get(), "error");  // the second remove: no such box
  EXPECT_NE(error["message"].get<std::string>().find("No box b1"), std::string::npos);
  asio::io_context io;
  tcp::socket socket(io);
  error_code ec;
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), explicit_port), ec);
  EXPECT_TRUE(ec);
}

TEST_F(ControlChannelTest, MalformedMessagesAreErrorEventsNotCrashes) {
  ASSERT_EQ(receive(hutchd_.get())["event"], "ready");
  auto expectError = [&](const std::string& text, const std::string& word,
                         std::vector<int> fds = {}) {
    if (!sendMessage(hutchd_.get(), text, fds)) return;  // too big for this socket's buffer
    Json event = receive(hutchd_.get());
    ASSERT_EQ(event.value("event", ""), "error") << text;
    EXPECT_NE(event["message"].get<std::string>().find(word), std::string::npos)
        << event["message"];
  };
  expectError("not json", "not JSON");
  expectError("[1,2]", "not a JSON object");
  expectError(R"({"id":"b1"})", "\"op\"");
  expectError(R"({"op":"box"})", "\"id\"");
  expectError(R"({"op":"launch","id":"b1"})", "unknown op");
  expectError(R"({"op":"policy","id":"nope","policy":{"allow":[]}})", "No box nope");
  expectError(R"({"op":"policy","id":"b1","policy":{"allow":"x"}})", "policy");
  expectError(R"({"op":"box","id":"b1","policy":{},"ca":{"cert":"x","key":"y"}})", "PEM");
  Json no_sockets = boxMessage("b2", ca_);
  expectError(no_sockets.dump(), "three sockets");
  Json bad_secret = boxMessage("b2", ca_);
  bad_secret["secrets"][0].erase("value");
  expectError(bad_secret.dump(), "value");
  Json bad_ca = boxMessage("b2", ca_);
  bad_ca["ca"] = 7;
  expectError(bad_ca.dump(), "\"ca\"");
  UniqueFd one = bindUdp();
  expectError(boxMessage("b3", ca_).dump(), "3 or 4 descriptors", {one.get()});
  uint16_t port = 0;
  UniqueFd l1 = listenTcp(port);
  UniqueFd l2 = listenTcp(port);
  UniqueFd u = bindUdp();
  // Wrong order: the UDP socket first.
  expectError(boxMessage("b4", ca_).dump(), "explicit proxy", {u.get(), l1.get(), l2.get()});
  // A fourth descriptor must be the NFLOG netlink socket.
  expectError(boxMessage("b4", ca_).dump(), "NETLINK_NETFILTER",
              {l1.get(), l2.get(), u.get(), u.get()});
  expectError(Json{{"op", "remove"}, {"id", "b1"}}.dump(), "descriptors", {u.get()});
  // Over 1 MiB: only sendable where the send buffer allows it (SO_SNDBUF up to wmem_max).
  int big = 4 << 20;
  setsockopt(hutchd_.get(), SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  std::string huge(ControlChannel::kMaxMessageBytes + 10, ' ');
  expectError(huge, "1 MiB");
  // Still serving: a good message after all that.
  uint16_t explicit_port = 0;
  UniqueFd a = listenTcp(explicit_port);
  // With the drop log's socket (made, not bound: binding an NFLOG group needs CAP_NET_ADMIN).
  UniqueFd nflog(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER));
  ASSERT_TRUE(nflog) << std::strerror(errno);
  sendMessage(hutchd_.get(), boxMessage("b5", ca_).dump(),
              {a.get(), l1.get(), u.get(), nflog.get()});
  EXPECT_EQ(connectThrough(explicit_port, "denied.example.test:443"), 403u);
  EXPECT_EQ(receiveEvent(hutchd_.get(), "log")["entry"]["box"], "b5");
}

#ifdef HUTCH_EGRESS_BIN
TEST(HutchEgressBinaryTest, ServesTheControlProtocolAndExitsWhenItCloses) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd hutchd(pair[0]);
  TempFile resolv("nameserver 127.0.0.1\n");
  std::string resolv_path = resolv.path().string();
  bool root = geteuid() == 0;  // then it also drops to nobody
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(pair[1], 3);  // dup2 clears close-on-exec on 3
    if (root) {
      execl(HUTCH_EGRESS_BIN, HUTCH_EGRESS_BIN, "--control-fd", "3", "--resolv-conf",
            resolv_path.c_str(), "--user", "65534:65534", static_cast<char*>(nullptr));
    } else {
      execl(HUTCH_EGRESS_BIN, HUTCH_EGRESS_BIN, "--control-fd", "3", "--resolv-conf",
            resolv_path.c_str(), static_cast<char*>(nullptr));
    }
    _exit(127);
  }
  ::close(pair[1]);
  EXPECT_EQ(receive(hutchd.get()), Json({{"event", "ready"}}));
  if (root) {
    // Dropped: the process runs as 65534 now.
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line) && line.rfind("Uid:", 0) != 0) {
    }
    EXPECT_EQ(line, "Uid:\t65534\t65534\t65534\t65534");
  }
  sendMessage(hutchd.get(), "{\"op\":");
  EXPECT_EQ(receive(hutchd.get()).value("event", ""), "error");
  auto ca = makeBoxCa("bin");
  ASSERT_TRUE(ca);
  uint16_t explicit_port = 0;
  uint16_t transparent_port = 0;
  UniqueFd a = listenTcp(explicit_port);
  UniqueFd b = listenTcp(transparent_port);
  UniqueFd c = bindUdp();
  sendMessage(hutchd.get(), boxMessage("bin", *ca).dump(), {a.get(), b.get(), c.get()});
  EXPECT_EQ(connectThrough(explicit_port, "denied.example.test:443"), 403u);
  Json event = receiveEvent(hutchd.get(), "log");
  EXPECT_EQ(event["entry"]["host"], "denied.example.test");
  hutchd.reset();
  int status = -1;
  for (int i = 0; i < 500; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "hutch-egress did not exit when the control socket closed";
  }
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(HutchEgressBinaryTest, RefusesAControlFdThatIsNotSeqpacket) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    dup2(devnull, 3);
    int err = ::open("/dev/null", O_WRONLY);
    dup2(err, 2);
    execl(HUTCH_EGRESS_BIN, HUTCH_EGRESS_BIN, "--control-fd", "3", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}
#endif

}  // namespace
}  // namespace hutch::egress::proxy

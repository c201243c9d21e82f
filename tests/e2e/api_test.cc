// The HTTP API of a real hutchd fed bad requests: each gets the right status and a JSON error,
// and nothing is created.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "harness.h"

namespace hutch::e2e {
namespace {

struct RawResponse {
  int status = 0;
  std::string body;
};

// One request over a fresh connection; the daemon closes it after answering (Connection: close).
RawResponse rawRequest(const std::string& socket_path, const std::string& request) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  size_t sent = 0;  // MSG_NOSIGNAL: the daemon may close early on an oversized request
  while (sent < request.size()) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) raw.append(buf, static_cast<size_t>(n));
  ::close(fd);
  RawResponse r;
  if (raw.size() > 12 && raw.rfind("HTTP/1.1 ", 0) == 0) r.status = std::stoi(raw.substr(9, 3));
  auto end = raw.find("\r\n\r\n");
  if (end != std::string::npos) r.body = raw.substr(end + 4);
  return r;
}

std::string post(const std::string& target, const std::string& body,
                 const std::string& extra_headers = {}) {
  return "POST " + target + " HTTP/1.1\r\nHost: hutchd\r\nConnection: close\r\n" + extra_headers +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

class ApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static Daemon* daemon_;

  void expectError(const RawResponse& r, int status, const std::string& code,
                   const std::string& fragment) {
    EXPECT_EQ(r.status, status) << r.body;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j["error"]["code"], code) << r.body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(fragment), std::string::npos) << r.body;
  }
};
Daemon* ApiTest::daemon_ = nullptr;

TEST_F(ApiTest, BadCreateBodiesAre400AndCreateNothing) {
  const std::string sock = daemon_->socket();
  expectError(rawRequest(sock, post("/v1/boxes", "{")), 400, "invalid_argument", "not valid JSON");
  expectError(rawRequest(sock, post("/v1/boxes", "[]")), 400, "invalid_argument", "JSON object");
  expectError(rawRequest(sock, post("/v1/boxes", R"({"cpus":"many"})")), 400, "invalid_argument",
              "wrong type");
  expectError(rawRequest(sock, post("/v1/boxes", R"({"cpuz":2})")), 400, "invalid_argument",
              "Unknown field");
  expectError(rawRequest(sock, post("/v1/boxes", R"({"memory_mib":1})")), 400, "invalid_argument",
              "memory_mib");
  auto list = rawRequest(sock, "GET /v1/boxes HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(list.status, 200);
  EXPECT_EQ(nlohmann::json::parse(list.body)["boxes"].size(), 0u);
}

TEST_F(ApiTest, RoutingErrors) {
  const std::string sock = daemon_->socket();
  expectError(rawRequest(sock, "GET /v1/nothing HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"),
              404, "not_found", "No API endpoint");
  expectError(rawRequest(sock,
                         "PUT /v1/boxes HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                         "Content-Length: 0\r\n\r\n"),
              405, "unsupported", "not allowed");
  expectError(
      rawRequest(sock, "GET /v1/boxes/ghost HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"), 404,
      "not_found", "No such box");
}

// {box} is resolved before the handler reads the body, so a box the caller cannot see is 404
// whatever the request; the body's own errors are unit-tested in exec_model_test and against a
// real box in tests/api.
TEST_F(ApiTest, ExecOfAnUnknownBoxIs404AndAWrongUpgradeIs400) {
  const std::string sock = daemon_->socket();
  expectError(rawRequest(sock, post("/v1/boxes/ghost/exec", R"({"argv":["true"]})")), 404,
              "not_found", "No such box");
  const std::string upgrade = "Connection: Upgrade\r\nUpgrade: hutch-exec\r\n";
  expectError(rawRequest(sock, post("/v1/boxes/ghost/exec", "not json", upgrade)), 404, "not_found",
              "No such box");
  expectError(rawRequest(sock, post("/v1/boxes/ghost/exec", R"({"argv":["true"]})", upgrade)), 404,
              "not_found", "No such box");
  // A box that exists, asked to upgrade to something else: told where the WebSocket is.
  ASSERT_EQ(daemon_->hutch({"run", "-d", "--name", "up"}).exit_code, 0);
  expectError(rawRequest(sock, post("/v1/boxes/up/exec", R"({"argv":["true"]})",
                                    "Connection: Upgrade\r\nUpgrade: websocket\r\n")),
              400, "invalid_argument", "exec/ws");
  expectError(rawRequest(sock, post("/v1/boxes/up/exec", "not json")), 400, "invalid_argument",
              "JSON");
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "up"}).exit_code, 0);
}

TEST_F(ApiTest, MalformedHttpGetsA400AndTheDaemonKeepsServing) {
  const std::string sock = daemon_->socket();
  auto r = rawRequest(sock, "THIS IS NOT HTTP\r\n\r\n");
  EXPECT_EQ(r.status, 400);
  // Over the 8 MiB body limit: refused (or cut off), and the daemon is unharmed.
  auto oversized = rawRequest(sock, post("/v1/boxes", std::string(9u << 20, ' ')));
  EXPECT_NE(oversized.status, 201);
  EXPECT_EQ(daemon_->hutch({"ls"}).exit_code, 0);
}

}  // namespace
}  // namespace hutch::e2e

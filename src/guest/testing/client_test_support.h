// Test support for AgentClient tests against the real hutch-agent (--listen on a temp socket):
// coroutine assertions, a fixture that runs coroutine test bodies, and small helpers.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "agent/testing/agent_process.h"
#include "guest/agent_client.h"
#include "guest/asio.h"

// ASSERT_* for coroutine bodies: gtest's fatal assertions `return`, which a coroutine cannot.
#define CO_FATAL_FAILURE_(message) \
  co_return GTEST_MESSAGE_(message, ::testing::TestPartResult::kFatalFailure)
#define CO_ASSERT_TRUE(c) GTEST_TEST_BOOLEAN_(c, #c, false, true, CO_FATAL_FAILURE_)
#define CO_ASSERT_FALSE(c) GTEST_TEST_BOOLEAN_(!(c), #c, true, false, CO_FATAL_FAILURE_)
#define CO_ASSERT_EQ(a, b) \
  GTEST_PRED_FORMAT2_(::testing::internal::EqHelper::Compare, a, b, CO_FATAL_FAILURE_)
#define CO_ASSERT_GT(a, b) \
  GTEST_PRED_FORMAT2_(::testing::internal::CmpHelperGT, a, b, CO_FATAL_FAILURE_)

namespace hutch::guest::testing {

namespace asio = boost::asio;
using agent::testing::AgentProcess;
using namespace std::chrono_literals;

// Only a guard against hangs: no test asserts on how long anything takes.
inline constexpr auto kHangGuard = 120s;

struct Collected {
  std::string out;
  std::string err;
  std::optional<proto::ExitStatus> exit;
  std::optional<Error> error;
};

inline asio::awaitable<Collected> collect(std::shared_ptr<ExecSession> session) {
  Collected c;
  while (true) {
    auto event = co_await session->next();
    if (!event) {
      c.error = event.error();
      co_return c;
    }
    switch (event->kind) {
      case ExecEvent::Kind::kStdout: c.out += event->data; break;
      case ExecEvent::Kind::kStderr: c.err += event->data; break;
      case ExecEvent::Kind::kExit: c.exit = event->exit_status; co_return c;
    }
  }
}

inline proto::ExecRequest command(std::vector<std::string> argv, bool pipe_stdin = false) {
  proto::ExecRequest request;
  request.argv = std::move(argv);
  request.pipe_stdin = pipe_stdin;
  return request;
}

// The pid of a child of parent whose command is name, if there is one now (else 0).
inline int findChild(int parent, const std::string& name) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t open = line.find('(');
    const size_t close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && line.substr(open + 1, close - open - 1) == name) return std::stoi(pid);
  }
  return 0;
}

// Waits (letting the client's loops run) until findChild finds one; 0 after the hang guard.
inline asio::awaitable<int> waitForChild(int parent, std::string name) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (std::chrono::steady_clock::now() < deadline) {
    if (const int pid = findChild(parent, name); pid != 0) co_return pid;
    timer.expires_after(10ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  co_return 0;
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class AgentClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::start();
    ASSERT_TRUE(agent) << agent.error().describe();
    agent_ = std::move(*agent);
  }

  void TearDown() override {
    for (auto& client : clients_) client->close();
    clients_.clear();
    io_.restart();
    io_.run_for(10s);  // lets the closed clients' loops finish
  }

  // Runs body on the test's io_context until it completes.
  void run(std::function<asio::awaitable<void>()> body) {
    bool done = false;
    asio::co_spawn(
        io_,
        [&]() -> asio::awaitable<void> {
          co_await body();
          done = true;
        },
        asio::detached);
    const auto guard = std::chrono::steady_clock::now() + kHangGuard;
    io_.restart();
    while (!done && std::chrono::steady_clock::now() < guard) io_.run_one_for(1s);
    ASSERT_TRUE(done) << "the test body did not finish (hang guard)";
  }

  // A connected, handshaken client to the agent.
  asio::awaitable<std::shared_ptr<AgentClient>> connect() {
    auto channel = co_await connectUnix(io_.get_executor(), agent_->socketPath(),
                                        std::chrono::steady_clock::now() + 30s);
    EXPECT_TRUE(channel) << channel.error().describe();
    if (!channel) co_return nullptr;
    auto client = AgentClient::create(std::move(*channel));
    clients_.push_back(client);
    auto ack = co_await client->handshake(30s);
    EXPECT_TRUE(ack) << ack.error().describe();
    co_return client;
  }

  asio::awaitable<Collected> runCommand(AgentClient& client, proto::ExecRequest request) {
    auto session = co_await client.exec(std::move(request));
    if (!session) co_return Collected{"", "", std::nullopt, session.error()};
    co_return co_await collect(*session);
  }

  // Replaces the agent with one that has a pretend box under its directory (--root): identity,
  // detached processes, services. prepare(root) runs before the agent starts. Returns the root.
  std::string restartAgentWithRoot(
      const std::function<void(const std::string&)>& prepare = nullptr) {
    auto agent = AgentProcess::prepare();
    EXPECT_TRUE(agent) << agent.error().describe();
    if (!agent) return {};
    agent_ = std::move(*agent);
    const std::string root = agent_->dir() + "/root";
    std::filesystem::create_directories(root + "/etc");
    if (prepare) prepare(root);
    auto launched = agent_->launch({"--root", root});
    EXPECT_TRUE(launched) << launched.error().describe();
    return root;
  }

  asio::io_context io_;
  std::unique_ptr<AgentProcess> agent_;
  std::vector<std::shared_ptr<AgentClient>> clients_;
};

}  // namespace hutch::guest::testing

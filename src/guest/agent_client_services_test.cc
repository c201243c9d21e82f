// Supervised services through AgentClient and the real agent (--listen --root: service files
// under ROOT/etc/hutch/services, logs under ROOT/var/log/hutch/services).
#include <gtest/gtest.h>
#include <signal.h>

#include "guest/agent_client.h"
#include "guest/testing/client_test_support.h"

namespace hutch::guest {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace testing;

void writeService(const std::string& root, const std::string& name, const std::string& json) {
  std::filesystem::create_directories(root + "/etc/hutch/services");
  std::ofstream(root + "/etc/hutch/services/" + name + ".json") << json;
}

asio::awaitable<void> pause(std::chrono::milliseconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(asio::use_awaitable);
}

// Polls the services until pred holds for the named one (or the hang guard); its status.
asio::awaitable<std::optional<proto::ServiceStatus>> waitFor(
    AgentClient& client, std::string name, std::function<bool(const proto::ServiceStatus&)> pred) {
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (std::chrono::steady_clock::now() < deadline) {
    auto list = co_await client.listServices(30s);
    if (!list) co_return std::nullopt;
    for (const auto& s : list->services) {
      if (s.name == name && pred(s)) co_return s;
    }
    co_await pause(20ms);
  }
  co_return std::nullopt;
}

class ServicesTest : public AgentClientTest {};

TEST_F(ServicesTest, ServicesStartAtBootAndAreRestartedWhenTheyDie) {
  const std::string root = restartAgentWithRoot([](const std::string& root) {
    writeService(root, "web", R"({"argv":["sh","-c","echo web up; exec sleep 1000"]})");
    writeService(root, "crashy", R"({"argv":["sh","-c","echo crash; exit 3"]})");
    writeService(root, "once", R"({"argv":["true"],"restart":"never"})");
    writeService(root, "fine", R"({"argv":["true"],"restart":"on-failure"})");
    writeService(root, "broken", R"({"argv":[]})");
    std::ofstream(root + "/etc/hutch/services/README") << "not a service";
  });
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    EXPECT_TRUE(client->helloAck()->hasCapability("services"));
    auto web = co_await waitFor(*client, "web",
                                [](const proto::ServiceStatus& s) { return s.state == "running"; });
    CO_ASSERT_TRUE(web);
    EXPECT_GT(web->pid, 0);
    EXPECT_EQ(web->restarts, 0u);
    EXPECT_EQ(web->log, root + "/var/log/hutch/services/web.log");
    EXPECT_GT(web->started_ns, 0);

    // A service that keeps dying is started again, with growing pauses (0.5 s, 1 s, ...).
    auto crashy = co_await waitFor(*client, "crashy",
                                   [](const proto::ServiceStatus& s) { return s.restarts >= 2; });
    CO_ASSERT_TRUE(crashy);
    EXPECT_EQ(crashy->last_exit, proto::ExitStatus::exited(3));
    const std::string crash_log = readFile(crashy->log);
    EXPECT_NE(crash_log.find("crash\n"), std::string::npos) << crash_log;
    EXPECT_NE(crash_log.find("crashy exited with code 3"), std::string::npos) << crash_log;

    auto list = co_await client->listServices(30s);
    CO_ASSERT_TRUE(list);
    std::vector<std::string> names;
    for (const auto& s : list->services) names.push_back(s.name);
    EXPECT_EQ(names, (std::vector<std::string>{"broken", "crashy", "fine", "once", "web"}));
    auto once = co_await waitFor(
        *client, "once", [](const proto::ServiceStatus& s) { return s.state == "stopped"; });
    CO_ASSERT_TRUE(once);
    EXPECT_EQ(once->restarts, 0u);
    EXPECT_EQ(once->last_exit, proto::ExitStatus::exited(0));
    auto fine = co_await waitFor(
        *client, "fine", [](const proto::ServiceStatus& s) { return s.state == "stopped"; });
    CO_ASSERT_TRUE(fine);
    const auto& broken = list->services[0];
    EXPECT_EQ(broken.state, "failed");
    EXPECT_NE(broken.error.find("argv"), std::string::npos) << broken.error;

    // Killed from outside: started again with a new pid.
    ::kill(web->pid, SIGKILL);
    auto again = co_await waitFor(*client, "web", [&](const proto::ServiceStatus& s) {
      return s.state == "running" && s.pid != web->pid;
    });
    CO_ASSERT_TRUE(again);
    EXPECT_EQ(again->restarts, 1u);
    EXPECT_EQ(again->last_exit, proto::ExitStatus::signaled(SIGKILL));
    // The new shell writes its line when it gets to it (a loaded host can take a while).
    std::string web_log = readFile(web->log);
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (web_log.find("web up\n") == web_log.rfind("web up\n") &&
           std::chrono::steady_clock::now() < until) {
      co_await pause(20ms);
      web_log = readFile(web->log);
    }
    EXPECT_NE(web_log.find("web up\n"), web_log.rfind("web up\n")) << web_log;  // twice
  });
}

TEST_F(ServicesTest, PowerOffStopsServicesWithSigterm) {
  const std::string root = restartAgentWithRoot([](const std::string& root) {
    writeService(root, "daemon",
                 R"({"argv":["sh","-c","trap 'echo got TERM; exit 0' TERM; sleep 1000 & wait"]})");
  });
  int pid = 0;
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto daemon = co_await waitFor(
        *client, "daemon", [](const proto::ServiceStatus& s) { return s.state == "running"; });
    CO_ASSERT_TRUE(daemon);
    pid = daemon->pid;
    co_await pause(200ms);  // the shell has set its trap
    EXPECT_TRUE(co_await client->poweroff(30s));
  });
  EXPECT_TRUE(agent::testing::waitForProcessGone(pid, 30s));
  const std::string log = readFile(root + "/var/log/hutch/services/daemon.log");
  EXPECT_NE(log.find("got TERM"), std::string::npos) << log;
}

TEST_F(AgentClientTest, ServicesNeedTheAgentsCapability) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();  // no --root
    CO_ASSERT_TRUE(client);
    auto list = co_await client->listServices(30s);
    CO_ASSERT_FALSE(list);
    EXPECT_EQ(list.error().code(), Errc::kUnsupported);
  });
}

}  // namespace
}  // namespace hutch::guest

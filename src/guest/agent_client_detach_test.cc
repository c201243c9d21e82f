// Detached processes through AgentClient and the real agent (--listen --root): started on their
// own with output in a log file, listed and signalled by id, outliving the connection.
#include <gtest/gtest.h>
#include <signal.h>

#include <set>
#include <thread>

#include "guest/agent_client.h"
#include "guest/testing/client_test_support.h"

namespace hutch::guest {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace testing;

proto::ExecRequest detached(std::vector<std::string> argv) {
  proto::ExecRequest request = command(std::move(argv));
  request.detach = true;
  return request;
}

// Polls the list until process id has ended (or the hang guard); its record.
asio::awaitable<std::optional<proto::ProcessInfo>> waitEnded(AgentClient& client, std::string id) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (std::chrono::steady_clock::now() < deadline) {
    auto list = co_await client.listProcesses(30s);
    if (!list) co_return std::nullopt;
    for (const auto& p : list->processes) {
      if (p.id == id && !p.running()) co_return p;
    }
    timer.expires_after(20ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  co_return std::nullopt;
}

class DetachTest : public AgentClientTest {
 protected:
  void SetUp() override {
    AgentClientTest::SetUp();
    root_ = restartAgentWithRoot();
  }
  std::string root_;
};

TEST_F(DetachTest, OutputGoesToTheLogAndTheExitIsRecorded) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    EXPECT_TRUE(client->helloAck()->hasCapability("detach"));
    const auto before = std::chrono::system_clock::now();
    const auto request =
        detached({"sh", "-c", "echo out; echo err >&2; sleep 0.2; echo done; exit 3"});
    auto session = co_await client->exec(request);
    CO_ASSERT_TRUE(session) << session.error().describe();
    EXPECT_TRUE((*session)->detached());
    EXPECT_TRUE((*session)->finished());
    EXPECT_GT((*session)->pid(), 0);
    const std::string id = (*session)->detachedId();
    EXPECT_EQ(id.size(), 8u);
    EXPECT_EQ((*session)->logPath(), root_ + "/var/log/hutch/exec/" + id + ".log");
    auto none = co_await (*session)->next();
    EXPECT_EQ(none.error().code(), Errc::kFailedPrecondition);

    auto ended = co_await waitEnded(*client, id);
    CO_ASSERT_TRUE(ended);
    EXPECT_EQ(ended->exit, proto::ExitStatus::exited(3));
    EXPECT_EQ(ended->pid, (*session)->pid());
    EXPECT_EQ(ended->argv, request.argv);
    EXPECT_EQ(ended->log, (*session)->logPath());
    const int64_t before_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(before.time_since_epoch()).count();
    EXPECT_GE(ended->started_ns, before_ns);
    EXPECT_EQ(readFile(ended->log), "out\nerr\ndone\n");
  });
}

TEST_F(DetachTest, ProcessesOutliveTheConnectionAndAreSignalledById) {
  std::string id;
  int pid = 0;
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    // A shell with a child of its own: the signal goes to the whole group.
    const auto request = detached({"sh", "-c", "sleep 1000 & wait"});
    auto session = co_await client->exec(request);
    CO_ASSERT_TRUE(session) << session.error().describe();
    id = (*session)->detachedId();
    pid = (*session)->pid();
    client->close();  // the host goes away; a running exec would be killed now
  });
  ASSERT_FALSE(id.empty());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(::kill(pid, 0), 0) << "the detached process died with the connection";
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();  // a new session
    CO_ASSERT_TRUE(client);
    const int sleeper = co_await waitForChild(pid, "sleep");
    EXPECT_GT(sleeper, 0);
    auto list = co_await client->listProcesses(30s);
    CO_ASSERT_TRUE(list) << list.error().describe();
    CO_ASSERT_EQ(list->processes.size(), 1u);
    EXPECT_EQ(list->processes[0].id, id);
    EXPECT_TRUE(list->processes[0].running());

    auto signalled = co_await client->signalProcess(id, SIGTERM, 30s);
    CO_ASSERT_TRUE(signalled) << signalled.error().describe();
    auto ended = co_await waitEnded(*client, id);
    CO_ASSERT_TRUE(ended);
    EXPECT_EQ(ended->exit, proto::ExitStatus::signaled(SIGTERM));
    EXPECT_TRUE(agent::testing::waitForProcessGone(sleeper, 30s));

    // Errors: ended, unknown, not a signal.
    auto again = co_await client->signalProcess(id, SIGTERM, 30s);
    EXPECT_EQ(again.error().code(), Errc::kFailedPrecondition);
    auto unknown = co_await client->signalProcess("nope", SIGTERM, 30s);
    EXPECT_EQ(unknown.error().code(), Errc::kNotFound);
    auto bad = co_await client->signalProcess(id, 0, 30s);
    EXPECT_EQ(bad.error().code(), Errc::kInvalidArgument);
    EXPECT_TRUE(co_await client->ping(30s));
  });
}

// A process of an exec session whose host vanished (hutchd killed, a box restored from a
// snapshot) is not killed: it goes on as a detached process, its later output in a log.
TEST_F(DetachTest, AnExecWhoseHostVanishesGoesOnAsADetachedProcess) {
  int pid = 0;
  const std::vector<std::string> argv = {"sh", "-c", "echo before; read x; echo after; sleep 1000"};
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto request = command(argv);
    request.pipe_stdin = true;
    auto session = co_await client->exec(request);
    CO_ASSERT_TRUE(session) << session.error().describe();
    pid = (*session)->pid();
    auto first = co_await (*session)->next();
    CO_ASSERT_TRUE(first);
    EXPECT_EQ(first->data, "before\n");
    // Gone without a word: no signal, no stdin EOF from the host.
    client->close();
  });
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(::kill(pid, 0), 0) << "the process died with its host";
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto list = co_await client->listProcesses(30s);
    CO_ASSERT_TRUE(list) << list.error().describe();
    CO_ASSERT_EQ(list->processes.size(), 1u);
    const proto::ProcessInfo adopted = list->processes[0];
    EXPECT_EQ(adopted.pid, pid);
    EXPECT_EQ(adopted.argv, argv);
    EXPECT_TRUE(adopted.running());
    EXPECT_EQ(adopted.log, root_ + "/var/log/hutch/exec/" + adopted.id + ".log");
    // Its stdin was closed when its host went: `read` returned and it went on writing.
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (readFile(adopted.log) != "after\n" && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(readFile(adopted.log), "after\n");
    auto signalled = co_await client->signalProcess(adopted.id, SIGTERM, 30s);
    CO_ASSERT_TRUE(signalled) << signalled.error().describe();
    auto ended = co_await waitEnded(*client, adopted.id);
    CO_ASSERT_TRUE(ended);
    EXPECT_EQ(ended->exit, proto::ExitStatus::signaled(SIGTERM));
  });
}

TEST_F(DetachTest, BadRequestsAreRefused) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto with_stdin = detached({"cat"});
    with_stdin.pipe_stdin = true;
    auto refused = co_await client->exec(with_stdin);
    CO_ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument);
    const auto missing_request = detached({"definitely-not-a-command-hutch"});
    auto missing = co_await client->exec(missing_request);
    CO_ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    auto list = co_await client->listProcesses(30s);
    CO_ASSERT_TRUE(list);
    EXPECT_TRUE(list->processes.empty());
  });
}

TEST_F(DetachTest, ManyProcessesGetDistinctIdsAndLogs) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    std::set<std::string> ids;
    for (int i = 0; i < 20; ++i) {
      const auto request = detached({"sh", "-c", "echo " + std::to_string(i)});
      auto session = co_await client->exec(request);
      CO_ASSERT_TRUE(session) << session.error().describe();
      ids.insert((*session)->detachedId());
    }
    EXPECT_EQ(ids.size(), 20u);
    auto list = co_await client->listProcesses(30s);
    CO_ASSERT_TRUE(list);
    EXPECT_EQ(list->processes.size(), 20u);
  });
}

TEST_F(AgentClientTest, DetachNeedsTheAgentsCapability) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();  // no --root: no "detach"
    CO_ASSERT_TRUE(client);
    const auto request = detached({"true"});
    auto refused = co_await client->exec(request);
    CO_ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), Errc::kUnsupported);
    auto list = co_await client->listProcesses(30s);
    EXPECT_EQ(list.error().code(), Errc::kUnsupported);
  });
}

}  // namespace
}  // namespace hutch::guest

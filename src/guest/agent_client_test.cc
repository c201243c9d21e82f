// AgentClient against the real hutch-agent (--listen on a temp socket), plus a scripted fake
// agent for the handshake's resend and timeout behaviour.
#include "guest/agent_client.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "agent/testing/agent_process.h"
#include "guest/asio.h"
#include "guest/testing/client_test_support.h"

namespace hutch::guest {
namespace {

namespace asio = boost::asio;
using agent::testing::AgentProcess;
using namespace std::chrono_literals;
using namespace testing;

TEST_F(AgentClientTest, HandshakeReportsTheAgent) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    CO_ASSERT_TRUE(client->helloAck());
    EXPECT_EQ(client->helloAck()->agent, "0.1.0");
    EXPECT_TRUE(client->helloAck()->hasCapability("exec"));
    // A second call returns the same answer.
    auto again = co_await client->handshake(1s);
    CO_ASSERT_TRUE(again);
    EXPECT_EQ(*again, *client->helloAck());
    EXPECT_TRUE(co_await client->ping(30s));
  });
}

TEST_F(AgentClientTest, EchoAndExitStatuses) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest echo_request = command({"echo", "hello", "world"});
    auto echo = co_await runCommand(*client, echo_request);
    CO_ASSERT_FALSE(echo.error) << echo.error->describe();
    EXPECT_EQ(echo.out, "hello world\n");
    EXPECT_EQ(echo.err, "");
    EXPECT_EQ(echo.exit, proto::ExitStatus::exited(0));

    const proto::ExecRequest three_request = command({"sh", "-c", "exit 3"});
    auto three = co_await runCommand(*client, three_request);
    EXPECT_EQ(three.exit, proto::ExitStatus::exited(3));

    const proto::ExecRequest killed_request = command({"sh", "-c", "kill -9 $$"});
    auto killed = co_await runCommand(*client, killed_request);
    EXPECT_EQ(killed.exit, proto::ExitStatus::signaled(9));
  });
}

TEST_F(AgentClientTest, StdoutAndStderrAreSeparate) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const auto request =
        command({"sh", "-c", "echo out1; echo err1 >&2; echo out2; echo err2 >&2"});
    auto r = co_await runCommand(*client, request);
    EXPECT_EQ(r.out, "out1\nout2\n");
    EXPECT_EQ(r.err, "err1\nerr2\n");
    EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
  });
}

TEST_F(AgentClientTest, EnvironmentAndCwdAreAsRequested) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    proto::ExecRequest request = command({"sh", "-c", "echo \"$GREETING|$HOME|$(pwd)\""});
    request.env = {"GREETING=hi there", "HOME=/nowhere"};
    request.cwd = agent_->dir();
    auto r = co_await runCommand(*client, request);
    EXPECT_EQ(r.out, "hi there|/nowhere|" + agent_->dir() + "\n");

    // Exactly the given environment plus PATH, HOME and USER.
    proto::ExecRequest env_only = command({"env"});
    env_only.env = {"ONLY=1"};
    auto env = co_await runCommand(*client, env_only);
    EXPECT_NE(env.out.find("ONLY=1\n"), std::string::npos);
    EXPECT_NE(env.out.find("PATH="), std::string::npos);
    EXPECT_NE(env.out.find("HOME="), std::string::npos);
    EXPECT_NE(env.out.find("USER="), std::string::npos);
    EXPECT_EQ(std::count(env.out.begin(), env.out.end(), '\n'), 4) << env.out;
  });
}

TEST_F(AgentClientTest, StdinUntilEof) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest session_request = command({"cat"}, /*pipe_stdin=*/true);
    auto session = co_await client->exec(session_request);
    CO_ASSERT_TRUE(session) << session.error().describe();
    EXPECT_GT((*session)->pid(), 0);
    EXPECT_TRUE(co_await (*session)->writeStdin("hello "));
    EXPECT_TRUE(co_await (*session)->writeStdin("stdin\n"));
    EXPECT_TRUE((*session)->closeStdin());
    auto r = co_await collect(*session);
    EXPECT_EQ(r.out, "hello stdin\n");
    EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
    // Without stdin, the process reads /dev/null.
    const proto::ExecRequest no_stdin_request = command({"cat"});
    auto no_stdin = co_await runCommand(*client, no_stdin_request);
    EXPECT_EQ(no_stdin.out, "");
    EXPECT_EQ(no_stdin.exit, proto::ExitStatus::exited(0));
  });
}

TEST_F(AgentClientTest, BinaryDataRoundTripsThroughStdin) {
  std::string data;
  for (int i = 0; i < 8192; ++i) {
    for (int b = 0; b < 256; ++b) data.push_back(static_cast<char>((b + i) & 0xff));
  }
  ASSERT_GT(data.size(), 4u * proto::kInitialWindow);  // needs credit in both directions
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest session_request = command({"cat"}, /*pipe_stdin=*/true);
    auto session = co_await client->exec(session_request);
    CO_ASSERT_TRUE(session);
    bool written = false;
    asio::co_spawn(
        io_,
        [&, s = *session]() -> asio::awaitable<void> {
          EXPECT_TRUE(co_await s->writeStdin(data));
          EXPECT_TRUE(s->closeStdin());
          written = true;
        },
        asio::detached);
    auto r = co_await collect(*session);
    EXPECT_TRUE(written);
    EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
    CO_ASSERT_EQ(r.out.size(), data.size());
    EXPECT_TRUE(r.out == data);
  });
}

TEST_F(AgentClientTest, TenConcurrentExecs) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    constexpr int kExecs = 10;
    std::vector<Collected> results(kExecs);
    int finished = 0;
    event::AsyncEvent all_done(io_.get_executor());
    for (int i = 0; i < kExecs; ++i) {
      asio::co_spawn(
          io_,
          [&, i]() -> asio::awaitable<void> {
            const std::string n = std::to_string(20000 + 1000 * i);
            const auto request = command({"sh", "-c",
                                          "seq " + std::to_string(i) + " " + n + "; echo done-" +
                                              std::to_string(i) + " >&2"});
            results[i] = co_await runCommand(*client, request);
            ++finished;
            all_done.notify();
          },
          asio::detached);
    }
    while (finished < kExecs) co_await all_done.wait();
    for (int i = 0; i < kExecs; ++i) {
      std::string expected;
      for (int v = i; v <= 20000 + 1000 * i; ++v) expected += std::to_string(v) + "\n";
      EXPECT_FALSE(results[i].error) << i;
      EXPECT_TRUE(results[i].out == expected) << "exec " << i << " got " << results[i].out.size()
                                              << " bytes, expected " << expected.size();
      EXPECT_EQ(results[i].err, "done-" + std::to_string(i) + "\n");
      EXPECT_EQ(results[i].exit, proto::ExitStatus::exited(0));
    }
  });
}

TEST_F(AgentClientTest, FiftyMegabytesArriveComplete) {
  const std::string file = agent_->dir() + "/data.bin";
  constexpr size_t kSize = 52428800;
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const auto request =
        command({"sh", "-c", "head -c " + std::to_string(kSize) + " /dev/urandom | tee " + file});
    auto r = co_await runCommand(*client, request);
    CO_ASSERT_FALSE(r.error) << r.error->describe();
    EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
    CO_ASSERT_EQ(r.out.size(), kSize);
    const std::string written = readFile(file);
    CO_ASSERT_EQ(written.size(), kSize);
    EXPECT_TRUE(r.out == written) << "the bytes differ from what tee wrote";
  });
}

TEST_F(AgentClientTest, SpawnFailuresAreErrors) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest missing_request = command({"no-such-command-hutch"});
    auto missing = co_await client->exec(missing_request);
    CO_ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    EXPECT_NE(missing.error().message().find("no-such-command-hutch"), std::string::npos);

    proto::ExecRequest bad_cwd = command({"true"});
    bad_cwd.cwd = "/no/such/dir";
    auto cwd = co_await client->exec(bad_cwd);
    CO_ASSERT_FALSE(cwd);
    EXPECT_EQ(cwd.error().code(), Errc::kNotFound);

    proto::ExecRequest bad_user = command({"true"});
    bad_user.user = "no-such-user-hutch";
    auto user = co_await client->exec(bad_user);
    CO_ASSERT_FALSE(user);
    EXPECT_EQ(user.error().code(), Errc::kNotFound);

    const proto::ExecRequest not_exec_request = command({"/etc/hostname"});
    auto not_exec = co_await client->exec(not_exec_request);
    CO_ASSERT_FALSE(not_exec);
    EXPECT_EQ(not_exec.error().code(), Errc::kInvalidArgument);

    proto::ExecRequest bad_shell = command({"sh"});
    bad_shell.login_shell = true;
    auto shell = co_await client->exec(bad_shell);
    CO_ASSERT_FALSE(shell);
    EXPECT_EQ(shell.error().code(), Errc::kInvalidArgument);

    const proto::ExecRequest empty_request = command({});
    auto empty = co_await client->exec(empty_request);
    CO_ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().code(), Errc::kInvalidArgument);

    // The connection is still good.
    const proto::ExecRequest ok_request = command({"true"});
    auto ok = co_await runCommand(*client, ok_request);
    EXPECT_EQ(ok.exit, proto::ExitStatus::exited(0));
  });
}

// Reads the session's output into out until it contains needle (true), or the session ends.
// needle by value: it lives in the coroutine frame, not in the caller's temporary.
asio::awaitable<bool> readUntil(ExecSession& session, std::string& out, std::string needle) {
  const size_t from = out.size();
  while (out.find(needle, from) == std::string::npos) {
    auto event = co_await session.next();
    if (!event || event->kind == ExecEvent::Kind::kExit) co_return false;
    out += event->data;
  }
  co_return true;
}

proto::ExecRequest ttyCommand(std::vector<std::string> argv, uint16_t rows = 0, uint16_t cols = 0) {
  proto::ExecRequest request = command(std::move(argv), /*pipe_stdin=*/true);
  request.tty = true;
  request.rows = rows;
  request.cols = cols;
  return request;
}

TEST_F(AgentClientTest, TtySessionsHaveATerminal) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    CO_ASSERT_TRUE(client->helloAck()->hasCapability("tty"));
    proto::ExecRequest request = ttyCommand({"sh", "-c", "test -t 0 && echo tty"});
    request.pipe_stdin = false;
    auto r = co_await runCommand(*client, request);
    CO_ASSERT_FALSE(r.error) << r.error->describe();
    EXPECT_EQ(r.out, "tty\r\n");
    EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
    // Without tty the same command sees no terminal.
    const proto::ExecRequest plain_request = command({"sh", "-c", "test -t 0 || echo no-tty"});
    auto plain = co_await runCommand(*client, plain_request);
    EXPECT_EQ(plain.out, "no-tty\n");
  });
}

TEST_F(AgentClientTest, TtySizeResizeInterruptAndExitStatus) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest request = ttyCommand({"sh"}, 24, 80);
    auto session = co_await client->exec(request);
    CO_ASSERT_TRUE(session) << session.error().describe();
    ExecSession& s = **session;
    EXPECT_TRUE(s.tty());
    std::string out;
    CO_ASSERT_TRUE(co_await s.writeStdin("stty size\n"));
    CO_ASSERT_TRUE(co_await readUntil(s, out, "24 80\r\n")) << out;

    CO_ASSERT_TRUE(s.resize(50, 132));
    CO_ASSERT_TRUE(co_await s.writeStdin("stty size\n"));
    CO_ASSERT_TRUE(co_await readUntil(s, out, "50 132\r\n")) << out;

    // ^C (0x03) becomes SIGINT for the foreground job through the terminal; the shell goes on.
    CO_ASSERT_TRUE(co_await s.writeStdin("sleep 100\n"));
    CO_ASSERT_GT(co_await waitForChild(s.pid(), "sleep"), 0);
    CO_ASSERT_TRUE(co_await s.writeStdin("\x03"));
    // The shell saw its job die of SIGINT: status 130.
    CO_ASSERT_TRUE(co_await s.writeStdin("echo back-$?\n"));
    CO_ASSERT_TRUE(co_await readUntil(s, out, "back-130")) << out;

    CO_ASSERT_TRUE(co_await s.writeStdin("exit 7\n"));
    auto r = co_await collect(*session);
    EXPECT_EQ(r.exit, proto::ExitStatus::exited(7)) << out << r.out;
  });
}

TEST_F(AgentClientTest, ResizeNeedsATtySession) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest request = command({"sleep", "600"});
    auto session = co_await client->exec(request);
    CO_ASSERT_TRUE(session);
    auto resized = (*session)->resize(24, 80);
    CO_ASSERT_FALSE(resized);
    EXPECT_EQ(resized.error().code(), Errc::kFailedPrecondition);
    EXPECT_TRUE((*session)->signal(SIGKILL));
    auto r = co_await collect(*session);
    EXPECT_EQ(r.exit, proto::ExitStatus::signaled(SIGKILL));
    // After the exit a tty session cannot be resized either.
    const proto::ExecRequest tty_request = ttyCommand({"true"});
    auto tty = co_await client->exec(tty_request);
    CO_ASSERT_TRUE(tty);
    auto done = co_await collect(*tty);
    EXPECT_EQ(done.exit, proto::ExitStatus::exited(0));
    EXPECT_EQ((*tty)->resize(24, 80).error().code(), Errc::kFailedPrecondition);
  });
}

TEST_F(AgentClientTest, GrandchildHoldingStdoutDoesNotHangTheExec) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest r_request = command({"sh", "-c", "sleep 600 & echo $!"});
    auto r = co_await runCommand(*client, r_request);
    CO_ASSERT_FALSE(r.error);
    EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
    const int grandchild = std::atoi(r.out.c_str());
    CO_ASSERT_GT(grandchild, 0) << r.out;
    ::kill(grandchild, SIGKILL);
  });
}

TEST_F(AgentClientTest, SignalsReachTheProcessGroup) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const auto request =
        command({"sh", "-c",
                 "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done"});
    auto session = co_await client->exec(request);
    CO_ASSERT_TRUE(session);
    auto first = co_await (*session)->next();
    CO_ASSERT_TRUE(first);
    EXPECT_EQ(first->data, "ready\n");
    EXPECT_FALSE((*session)->signal(0));
    EXPECT_TRUE((*session)->signal(SIGTERM));
    auto r = co_await collect(*session);
    EXPECT_EQ(r.out, "got-term\n");
    EXPECT_EQ(r.exit, proto::ExitStatus::exited(7));

    const proto::ExecRequest sleeper_request = command({"sleep", "600"});
    auto sleeper = co_await client->exec(sleeper_request);
    CO_ASSERT_TRUE(sleeper);
    EXPECT_TRUE((*sleeper)->signal(SIGKILL));
    auto killed = co_await collect(*sleeper);
    EXPECT_EQ(killed.exit, proto::ExitStatus::signaled(SIGKILL));
    auto after = co_await (*sleeper)->next();
    CO_ASSERT_FALSE(after);
    EXPECT_EQ(after.error().code(), Errc::kFailedPrecondition);
  });
}

TEST_F(AgentClientTest, DroppingASessionKillsItsProcess) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    int pid = 0;
    {
      const proto::ExecRequest session_request = command({"sleep", "600"});
      auto session = co_await client->exec(session_request);
      CO_ASSERT_TRUE(session);
      pid = (*session)->pid();
    }
    EXPECT_TRUE(co_await client->ping(30s));  // the kill was handled before the pong
    EXPECT_TRUE(agent::testing::waitForProcessGone(pid, 30s));
  });
}

TEST_F(AgentClientTest, ConnectionLossEndsOpenSessions) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest session_request = command({"sleep", "600"}, /*pipe_stdin=*/true);
    auto session = co_await client->exec(session_request);
    CO_ASSERT_TRUE(session);
    agent_->kill();  // the box died
    auto event = co_await (*session)->next();
    CO_ASSERT_FALSE(event);
    EXPECT_EQ(event.error().code(), Errc::kUnavailable);
    EXPECT_EQ((co_await (*session)->writeStdin("x")).error().code(), Errc::kUnavailable);
    EXPECT_EQ((co_await client->closed()).code(), Errc::kUnavailable);
    EXPECT_FALSE(client->isOpen());
    const proto::ExecRequest exec_request = command({"true"});
    auto exec = co_await client->exec(exec_request);
    CO_ASSERT_FALSE(exec);
    EXPECT_EQ(exec.error().code(), Errc::kUnavailable);
  });
}

TEST_F(AgentClientTest, CloseCancelsOpenSessions) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest session_request = command({"sleep", "600"});
    auto session = co_await client->exec(session_request);
    CO_ASSERT_TRUE(session);
    const int pid = (*session)->pid();
    client->close();
    auto event = co_await (*session)->next();
    CO_ASSERT_FALSE(event);
    EXPECT_EQ(event.error().code(), Errc::kCancelled);
    // The agent saw the disconnect and killed the session's process.
    EXPECT_TRUE(agent::testing::waitForProcessGone(pid, 30s));
  });
}

TEST_F(AgentClientTest, PoweroffEndsTheAgent) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto off = co_await client->poweroff(30s);
    EXPECT_TRUE(off) << off.error().describe();
    EXPECT_FALSE(client->isOpen());
  });
  auto status = agent_->waitExit(30s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

TEST_F(AgentClientTest, ConnectUnixWaitsForTheSocketToAppear) {
  auto late = AgentProcess::prepare();
  ASSERT_TRUE(late);
  run([&]() -> asio::awaitable<void> {
    asio::steady_timer starter(io_, 50ms);
    starter.async_wait([&](boost::system::error_code) { EXPECT_TRUE((*late)->launch()); });
    auto channel = co_await connectUnix(io_.get_executor(), (*late)->socketPath(),
                                        std::chrono::steady_clock::now() + 30s);
    CO_ASSERT_TRUE(channel) << channel.error().describe();
    auto client = AgentClient::create(std::move(*channel));
    clients_.push_back(client);
    EXPECT_TRUE(co_await client->handshake(30s));
  });
}

TEST_F(AgentClientTest, ConnectUnixTimesOut) {
  run([&]() -> asio::awaitable<void> {
    auto channel = co_await connectUnix(io_.get_executor(), agent_->dir() + "/absent.sock",
                                        std::chrono::steady_clock::now() + 100ms);
    CO_ASSERT_FALSE(channel);
    EXPECT_EQ(channel.error().code(), Errc::kTimeout);
  });
}

// A scripted agent: ignores the first `silent_hellos` kHellos (a guest still booting), then
// answers every kHello twice and every kPing; counts the kHellos it saw.
class FakeAgent {
 public:
  // preamble: bytes sent as soon as the host connects (leftovers of an earlier session);
  // after_ack: bytes sent right after the first answer to kHello.
  FakeAgent(asio::io_context& io, std::string path, int silent_hellos, std::string preamble = "",
            std::string after_ack = "")
      : acceptor_(io, asio::local::stream_protocol::endpoint(path)),
        silent_hellos_(silent_hellos),
        preamble_(std::move(preamble)),
        after_ack_(std::move(after_ack)) {}

  asio::awaitable<void> serve() {
    auto socket = co_await acceptor_.async_accept(asio::use_awaitable);
    if (!preamble_.empty()) {
      boost::system::error_code ec;
      co_await asio::async_write(socket, asio::buffer(preamble_),
                                 asio::redirect_error(asio::use_awaitable, ec));
    }
    proto::FrameDecoder decoder;
    char buffer[4096];
    while (true) {
      boost::system::error_code ec;
      size_t n = co_await socket.async_read_some(asio::buffer(buffer),
                                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      decoder.feed(std::span<const char>(buffer, n));
      while (auto frame = decoder.next()) {
        if (!*frame) break;
        std::string reply;
        if ((*frame)->type == proto::FrameType::kHello && ++hellos_ > silent_hellos_) {
          for (int i = 0; i < 2; ++i) {
            proto::encodeFrame(proto::makeFrame(proto::FrameType::kHelloAck, 0,
                                                proto::HelloAck{1, "fake", {"exec"}}),
                               reply);
          }
          reply += after_ack_;
          after_ack_.clear();
        }
        if ((*frame)->type == proto::FrameType::kPing) {
          proto::encodeFrame(proto::Frame{proto::FrameType::kPong, 0, (*frame)->payload}, reply);
        }
        if (!reply.empty()) {
          co_await asio::async_write(socket, asio::buffer(reply),
                                     asio::redirect_error(asio::use_awaitable, ec));
        }
      }
    }
  }

  int hellos() const { return hellos_; }

 private:
  asio::local::stream_protocol::acceptor acceptor_;
  int silent_hellos_;
  std::string preamble_;
  std::string after_ack_;
  int hellos_ = 0;
};

TEST_F(AgentClientTest, HandshakeResendsHelloUntilAnsweredAndIgnoresDuplicates) {
  const std::string path = agent_->dir() + "/fake.sock";
  FakeAgent fake(io_, path, /*silent_hellos=*/3);
  asio::co_spawn(io_, fake.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    auto channel =
        co_await connectUnix(io_.get_executor(), path, std::chrono::steady_clock::now() + 30s);
    CO_ASSERT_TRUE(channel);
    AgentClientOptions options;
    options.hello_interval = 20ms;
    auto client = AgentClient::create(std::move(*channel), options);
    clients_.push_back(client);
    auto ack = co_await client->handshake(60s);
    CO_ASSERT_TRUE(ack) << ack.error().describe();
    EXPECT_EQ(ack->agent, "fake");
    EXPECT_GE(fake.hellos(), 4);
    // The duplicate acknowledgements did not disturb the connection.
    EXPECT_TRUE(co_await client->ping(30s));
    EXPECT_TRUE(client->isOpen());
  });
}

TEST_F(AgentClientTest, HandshakeSkipsLeftoversOfAnEarlierSession) {
  std::string stale;
  proto::encodeFrame(proto::Frame{proto::FrameType::kStdout, 3, std::string(70000, 'o')}, stale);
  proto::encodeFrame(
      proto::makeFrame(proto::FrameType::kError, 0, proto::ErrorMessage{"protocol", "old session"}),
      stale);
  stale += std::string("\x30\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00half", 16);
  const std::string path = agent_->dir() + "/stale.sock";
  FakeAgent fake(io_, path, /*silent_hellos=*/0, stale);
  asio::co_spawn(io_, fake.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    auto channel =
        co_await connectUnix(io_.get_executor(), path, std::chrono::steady_clock::now() + 30s);
    CO_ASSERT_TRUE(channel);
    auto client = AgentClient::create(std::move(*channel));
    clients_.push_back(client);
    auto ack = co_await client->handshake(60s);
    CO_ASSERT_TRUE(ack) << ack.error().describe();
    EXPECT_EQ(ack->agent, "fake");
    // Frames after the answer are decoded in step.
    EXPECT_TRUE(co_await client->ping(30s));
    EXPECT_TRUE(client->isOpen());
  });
}

// After a restore from a snapshot the agent may still push frames of the snapshot's host: output
// and exits of streams this host never opened, half frames, before (and, for streams that were
// busy, right after) its answer. The handshake skips them and later frames for unknown streams
// are dropped.
TEST_F(AgentClientTest, StaleFramesOfAnotherHostAreIgnored) {
  std::string stale;
  proto::encodeFrame(proto::Frame{proto::FrameType::kStarted, 4, R"({"pid":77})"}, stale);
  proto::encodeFrame(proto::Frame{proto::FrameType::kStdout, 4, "old output"}, stale);
  proto::encodeFrame(proto::makeFrame(proto::FrameType::kExit, 4, proto::ExitStatus::exited(0)),
                     stale);
  proto::encodeFrame(proto::Frame{proto::FrameType::kResult, 2, "{}"}, stale);
  proto::encodeFrame(proto::Frame{proto::FrameType::kPong, 0, "999"}, stale);
  proto::encodeFrame(proto::Frame{proto::FrameType::kWindow, 4, proto::encodeWindow(5)}, stale);
  // An answer-shaped frame whose payload is not a valid acknowledgement is not the answer.
  proto::encodeFrame(proto::Frame{proto::FrameType::kHelloAck, 0, R"({"version":1})"}, stale);
  stale += std::string("\x00\x01\x00\x00\x14\x00\x00\x00\x04\x00\x00\x00trunc", 17);
  std::string after;
  proto::encodeFrame(proto::Frame{proto::FrameType::kStderr, 1, "not ours"}, after);
  proto::encodeFrame(proto::makeFrame(proto::FrameType::kExit, 1, proto::ExitStatus::exited(1)),
                     after);
  proto::encodeFrame(
      proto::makeFrame(proto::FrameType::kError, 9, proto::ErrorMessage{"protocol", "old stream"}),
      after);
  const std::string path = agent_->dir() + "/restored.sock";
  FakeAgent fake(io_, path, /*silent_hellos=*/0, stale, after);
  asio::co_spawn(io_, fake.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    auto channel =
        co_await connectUnix(io_.get_executor(), path, std::chrono::steady_clock::now() + 30s);
    CO_ASSERT_TRUE(channel);
    auto client = AgentClient::create(std::move(*channel));
    clients_.push_back(client);
    auto ack = co_await client->handshake(60s);
    CO_ASSERT_TRUE(ack) << ack.error().describe();
    EXPECT_EQ(ack->agent, "fake");
    // The stale pong did not answer this ping for it; the connection is in step and open.
    EXPECT_TRUE(co_await client->ping(30s));
    EXPECT_TRUE(co_await client->ping(30s));
    EXPECT_TRUE(client->isOpen());
  });
}

TEST_F(AgentClientTest, IdentityIsAppliedByTheAgent) {
  const std::string root = restartAgentWithRoot();
  std::ofstream(root + "/etc/hosts") << "127.0.0.1\tlocalhost\n127.0.1.1\ttemplate\n";
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    EXPECT_TRUE(client->helloAck()->hasCapability("identity"));
    Identity identity = makeIdentity("my_box");
    const auto before = std::chrono::system_clock::now();
    auto applied = co_await client->applyIdentity(identity, 30s);
    CO_ASSERT_TRUE(applied) << applied.error().describe();
    EXPECT_EQ(*applied, proto::IdentityResult{});
    EXPECT_EQ(readFile(root + "/etc/hostname"), "my-box\n");
    EXPECT_EQ(readFile(root + "/etc/hosts"), "127.0.0.1\tlocalhost\n127.0.1.1\tmy-box\n");
    EXPECT_EQ(readFile(root + "/etc/machine-id"), identity.machine_id + "\n");
    // The clock was stamped when the request was sent.
    std::istringstream log(readFile(root + "/system.log"));
    std::string word;
    int64_t ns = 0;
    log >> word >> ns;
    EXPECT_EQ(word, "clock");
    const int64_t before_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(before.time_since_epoch()).count();
    EXPECT_GE(ns, before_ns);
    EXPECT_LT(ns, before_ns + int64_t{60} * 1'000'000'000);
    log >> word;
    EXPECT_EQ(word, "seed");
    log >> word;
    EXPECT_EQ(word, identity.seed);

    // grow_root: the "disk" grows a moment later.
    Identity grow;
    grow.set_clock = false;
    grow.grow_root = true;
    std::ofstream(root + "/disk-grown") << "";
    auto grown = co_await client->applyIdentity(grow, 30s);
    CO_ASSERT_TRUE(grown) << grown.error().describe();
    EXPECT_TRUE(grown->root_grown);
    EXPECT_EQ(grown->root_bytes, 512u * 4096);

    // Bad values are refused before anything is sent; the agent's own refusals come back.
    Identity bad;
    bad.machine_id = "XYZ";
    auto refused = co_await client->applyIdentity(bad, 30s);
    CO_ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument);
    std::filesystem::remove_all(root + "/etc");
    Identity unwritable;
    unwritable.hostname = "x";
    unwritable.set_clock = false;
    auto failed = co_await client->applyIdentity(unwritable, 30s);
    CO_ASSERT_FALSE(failed);
    EXPECT_NE(failed.error().message().find("/etc/hostname"), std::string::npos)
        << failed.error().message();
    EXPECT_TRUE(co_await client->ping(30s));
  });
}

TEST_F(AgentClientTest, IdentityNeedsTheAgentsCapability) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();  // a --listen agent without --root
    CO_ASSERT_TRUE(client);
    const Identity identity = makeIdentity("b");
    auto applied = co_await client->applyIdentity(identity, 30s);
    CO_ASSERT_FALSE(applied);
    EXPECT_EQ(applied.error().code(), Errc::kUnsupported);
  });
}

TEST(IdentityTest, FreshIdentitiesAreRandomAndValid) {
  const Identity a = makeIdentity("web_1");
  const Identity b = makeIdentity("web_1");
  EXPECT_EQ(a.hostname, "web-1");
  EXPECT_TRUE(proto::isValidMachineId(a.machine_id)) << a.machine_id;
  EXPECT_EQ(a.machine_id[12], '4');  // UUID version 4
  EXPECT_EQ(a.seed.size(), 96u);
  EXPECT_NE(a.machine_id, b.machine_id);
  EXPECT_NE(a.seed, b.seed);
  EXPECT_TRUE(a.set_clock);
  EXPECT_FALSE(a.grow_root);
  proto::Identity wire{a.hostname, a.machine_id, 1, a.seed, false};
  EXPECT_TRUE(proto::validate(wire));
}

TEST(IdentityTest, HostnamesForBoxNames) {
  EXPECT_EQ(hostnameFor("web"), "web");
  EXPECT_EQ(hostnameFor("a.b_c"), "a.b-c");
  EXPECT_EQ(hostnameFor("_x"), "x");
  EXPECT_EQ(hostnameFor("..."), "box");
  EXPECT_EQ(hostnameFor(std::string(80, 'a')).size(), 64u);
  EXPECT_TRUE(proto::isValidHostname(hostnameFor("-._weird name!")));
}

TEST_F(AgentClientTest, TtyNeedsTheAgentsCapability) {
  const std::string path = agent_->dir() + "/old.sock";
  FakeAgent fake(io_, path, /*silent_hellos=*/0);  // capabilities: exec only
  asio::co_spawn(io_, fake.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    auto channel =
        co_await connectUnix(io_.get_executor(), path, std::chrono::steady_clock::now() + 30s);
    CO_ASSERT_TRUE(channel);
    auto client = AgentClient::create(std::move(*channel));
    clients_.push_back(client);
    CO_ASSERT_TRUE(co_await client->handshake(60s));
    const proto::ExecRequest request = ttyCommand({"sh"});
    auto exec = co_await client->exec(request);
    CO_ASSERT_FALSE(exec);
    EXPECT_EQ(exec.error().code(), Errc::kUnsupported);
    EXPECT_NE(exec.error().message().find("tty"), std::string::npos);
    // Nothing was sent that the old agent would take for a broken connection.
    EXPECT_TRUE(co_await client->ping(30s));
  });
}

TEST_F(AgentClientTest, HandshakeTimesOutWhenNothingAnswers) {
  const std::string path = agent_->dir() + "/silent.sock";
  FakeAgent fake(io_, path, /*silent_hellos=*/1000000);
  asio::co_spawn(io_, fake.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    auto channel =
        co_await connectUnix(io_.get_executor(), path, std::chrono::steady_clock::now() + 30s);
    CO_ASSERT_TRUE(channel);
    auto client = AgentClient::create(std::move(*channel));
    clients_.push_back(client);
    auto ack = co_await client->handshake(300ms);
    CO_ASSERT_FALSE(ack);
    EXPECT_EQ(ack.error().code(), Errc::kTimeout);
    EXPECT_GE(fake.hellos(), 1);
    const proto::ExecRequest exec_request = command({"true"});
    auto exec = co_await client->exec(exec_request);
    CO_ASSERT_FALSE(exec);
    EXPECT_EQ(exec.error().code(), Errc::kFailedPrecondition);
  });
}

}  // namespace
}  // namespace hutch::guest

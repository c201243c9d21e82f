// The agent's protocol rules, driven with raw frames over its --listen socket: the handshake,
// errors and session resets, and flow-control limits that a well-behaved client never tests.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "agent/testing/agent_process.h"
#include "agent/testing/raw_connection.h"
#include "proto/messages.h"

namespace hutch::agent {
namespace {

using proto::Frame;
using proto::FrameType;
using testing::AgentProcess;
using testing::RawConnection;

constexpr auto kGone = std::chrono::seconds(30);  // hang guard only

std::string header(uint32_t length, uint8_t type, uint32_t stream) {
  Frame frame{static_cast<FrameType>(type), stream, ""};
  std::string h = proto::encodeFrame(frame);
  for (int i = 0; i < 4; ++i) h[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return h;
}

Frame execFrame(uint32_t stream, std::vector<std::string> argv, bool pipe_stdin = false) {
  proto::ExecRequest request;
  request.argv = std::move(argv);
  request.pipe_stdin = pipe_stdin;
  return proto::makeFrame(FrameType::kExec, stream, request);
}

Frame ttyFrame(uint32_t stream, std::vector<std::string> argv, bool pipe_stdin = true,
               uint16_t rows = 0, uint16_t cols = 0) {
  proto::ExecRequest request;
  request.argv = std::move(argv);
  request.pipe_stdin = pipe_stdin;
  request.tty = true;
  request.rows = rows;
  request.cols = cols;
  return proto::makeFrame(FrameType::kExec, stream, request);
}

Frame resizeFrame(uint32_t stream, uint16_t rows, uint16_t cols) {
  return proto::makeFrame(FrameType::kResize, stream, proto::WindowSize{rows, cols});
}

Frame stdinFrame(uint32_t stream, std::string data) {
  return Frame{FrameType::kStdin, stream, std::move(data)};
}

// The pid of a child of parent whose command is name, once there is one (0 after the timeout).
pid_t waitForChild(pid_t parent, const std::string& name, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
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
      pid_t ppid = 0;
      rest >> state >> ppid;
      if (ppid == parent && line.substr(open + 1, close - open - 1) == name) {
        return static_cast<pid_t>(std::stoi(pid));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

class ServerProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::start();
    ASSERT_TRUE(agent) << agent.error().describe();
    agent_ = std::move(*agent);
    conn_ = connect();
  }

  std::unique_ptr<RawConnection> connect() {
    auto fd = agent_->connect();
    EXPECT_TRUE(fd) << fd.error().describe();
    return std::make_unique<RawConnection>(fd ? std::move(*fd) : UniqueFd());
  }

  Frame read(RawConnection& conn) {
    auto frame = conn.read();
    EXPECT_TRUE(frame) << frame.error().describe();
    return frame ? *frame : Frame{FrameType::kError, 0xffffffff, "{}"};
  }

  proto::ErrorMessage expectError(RawConnection& conn, uint32_t stream) {
    Frame frame = read(conn);
    EXPECT_EQ(frame.type, FrameType::kError);
    EXPECT_EQ(frame.stream, stream);
    auto error = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
    EXPECT_TRUE(error);
    return error ? *error : proto::ErrorMessage{};
  }

  // Runs `echo hi` on stream id and checks its output and exit.
  void expectEchoWorks(RawConnection& conn, uint32_t id) {
    ASSERT_TRUE(conn.send(execFrame(id, {"echo", "hi"})));
    std::string out;
    while (true) {
      Frame frame = read(conn);
      ASSERT_EQ(frame.stream, id) << "type " << int(frame.type);
      if (frame.type == FrameType::kStdout) out += frame.payload;
      if (frame.type == FrameType::kExit) {
        EXPECT_EQ(*proto::decodeMessage<proto::ExitStatus>(frame.payload),
                  proto::ExitStatus::exited(0));
        break;
      }
      ASSERT_NE(frame.type, FrameType::kError) << frame.payload;
    }
    EXPECT_EQ(out, "hi\n");
  }

  // Starts `sleep 1000` on stream id; returns its pid.
  pid_t startSleeper(RawConnection& conn, uint32_t id) {
    EXPECT_TRUE(conn.send(execFrame(id, {"sleep", "1000"})));
    Frame started = read(conn);
    EXPECT_EQ(started.type, FrameType::kStarted) << started.payload;
    auto message = proto::decodeMessage<proto::Started>(started.payload);
    return message ? message->pid : -1;
  }

  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<RawConnection> conn_;
};

TEST_F(ServerProtocolTest, HelloIsAnsweredWithVersionAndCapabilities) {
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kHello, 0, proto::Hello{1, "test"})));
  Frame frame = read(*conn_);
  ASSERT_EQ(frame.type, FrameType::kHelloAck);
  EXPECT_EQ(frame.stream, 0u);
  auto ack = proto::decodeMessage<proto::HelloAck>(frame.payload);
  ASSERT_TRUE(ack) << frame.payload;
  EXPECT_EQ(ack->version, 1u);
  EXPECT_EQ(ack->agent, "0.1.0");
  for (const char* capability : {"exec", "signal", "window", "poweroff", "tty"}) {
    EXPECT_TRUE(ack->hasCapability(capability)) << capability;
  }
}

TEST_F(ServerProtocolTest, PingWorksBeforeTheHandshake) {
  ASSERT_TRUE(conn_->send(Frame{FrameType::kPing, 0, "payload-42"}));
  Frame frame = read(*conn_);
  EXPECT_EQ(frame.type, FrameType::kPong);
  EXPECT_EQ(frame.payload, "payload-42");
}

TEST_F(ServerProtocolTest, ExecBeforeHelloIsRefused) {
  ASSERT_TRUE(conn_->send(execFrame(1, {"true"})));
  EXPECT_EQ(expectError(*conn_, 0).code, "protocol");
  // The connection still works.
  ASSERT_TRUE(conn_->handshake());
  expectEchoWorks(*conn_, 1);
}

TEST_F(ServerProtocolTest, UnsupportedVersionIsRefused) {
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kHello, 0, proto::Hello{2, "future"})));
  auto error = expectError(*conn_, 0);
  EXPECT_EQ(error.code, "unsupported");
  EXPECT_NE(error.message.find("version"), std::string::npos);
}

TEST_F(ServerProtocolTest, DuplicateHellosAreHarmless) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kHello, 0, proto::Hello{1, "test"})));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(read(*conn_).type, FrameType::kHelloAck);
  expectEchoWorks(*conn_, 1);
}

TEST_F(ServerProtocolTest, GarbageGetsAProtocolErrorAndTheAgentKeepsServing) {
  ASSERT_TRUE(conn_->handshake());
  const pid_t sleeper = startSleeper(*conn_, 5);
  ASSERT_GT(sleeper, 0);
  ASSERT_TRUE(conn_->sendBytes("GET / HTTP/1.1\r\nHost: hutch\r\n\r\n"));
  EXPECT_EQ(expectError(*conn_, 0).code, "protocol");
  // The reset killed the session's processes.
  EXPECT_TRUE(testing::waitForProcessGone(sleeper, kGone));
  // A new session on the same connection...
  ASSERT_TRUE(conn_->handshake());
  expectEchoWorks(*conn_, 5);
  // ...and on a new connection.
  conn_->close();
  auto second = connect();
  ASSERT_TRUE(second->handshake());
  expectEchoWorks(*second, 1);
}

TEST_F(ServerProtocolTest, OversizedHeaderGetsAProtocolError) {
  ASSERT_TRUE(conn_->handshake());
  ASSERT_TRUE(conn_->sendBytes(header(0xfffffff0u, 0x12, 1)));
  auto error = expectError(*conn_, 0);
  EXPECT_EQ(error.code, "protocol");
  EXPECT_NE(error.message.find("exceeds"), std::string::npos) << error.message;
  ASSERT_TRUE(conn_->handshake());
  expectEchoWorks(*conn_, 1);
}

TEST_F(ServerProtocolTest, UnknownTypeAndFlagsGetProtocolErrors) {
  ASSERT_TRUE(conn_->handshake());
  ASSERT_TRUE(conn_->sendBytes(header(0, 0x55, 0)));
  EXPECT_EQ(expectError(*conn_, 0).code, "protocol");
  ASSERT_TRUE(conn_->handshake());
  std::string flagged = proto::encodeFrame(Frame{FrameType::kPing, 0, ""});
  flagged[5] = 1;
  ASSERT_TRUE(conn_->sendBytes(flagged));
  EXPECT_EQ(expectError(*conn_, 0).code, "protocol");
}

TEST_F(ServerProtocolTest, HostOnlyFramesFromTheHostResetTheSession) {
  ASSERT_TRUE(conn_->handshake());
  ASSERT_TRUE(conn_->send(Frame{FrameType::kStdout, 1, "x"}));
  EXPECT_EQ(expectError(*conn_, 0).code, "protocol");
}

TEST_F(ServerProtocolTest, BadExecRequestsFailOnTheirStream) {
  ASSERT_TRUE(conn_->handshake());
  ASSERT_TRUE(conn_->send(Frame{FrameType::kExec, 3, "{not json"}));
  EXPECT_EQ(expectError(*conn_, 3).code, "protocol");
  ASSERT_TRUE(conn_->send(Frame{FrameType::kExec, 4, R"({"argv":[]})"}));
  EXPECT_EQ(expectError(*conn_, 4).code, "invalid_argument");
  ASSERT_TRUE(conn_->send(Frame{FrameType::kExec, 5, R"({"argv":["sh"],"login_shell":true})"}));
  EXPECT_EQ(expectError(*conn_, 5).code, "invalid_argument");
  ASSERT_TRUE(
      conn_->send(Frame{FrameType::kExec, 9, R"({"argv":["sh"],"tty":true,"rows":70000})"}));
  EXPECT_EQ(expectError(*conn_, 9).code, "protocol");
  ASSERT_TRUE(conn_->send(execFrame(6, {"definitely-not-a-command-hutch"})));
  auto missing = expectError(*conn_, 6);
  EXPECT_EQ(missing.code, "not_found");
  EXPECT_NE(missing.message.find("definitely-not-a-command-hutch"), std::string::npos);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kExec, 7, R"({"argv":["true"],"cwd":"/nonexistent"})"}));
  EXPECT_EQ(expectError(*conn_, 7).code, "not_found");
  ASSERT_TRUE(
      conn_->send(Frame{FrameType::kExec, 8, R"({"argv":["true"],"user":"no-such-user"})"}));
  EXPECT_EQ(expectError(*conn_, 8).code, "not_found");
  // The session is still fine, and the failed ids can be used.
  expectEchoWorks(*conn_, 6);
}

TEST_F(ServerProtocolTest, ExecOnStreamZeroOrAnOpenStreamIsRefused) {
  ASSERT_TRUE(conn_->handshake());
  const pid_t sleeper = startSleeper(*conn_, 9);
  ASSERT_GT(sleeper, 0);
  ASSERT_TRUE(conn_->send(execFrame(9, {"true"})));
  EXPECT_EQ(expectError(*conn_, 9).code, "already_exists");
  ASSERT_TRUE(conn_->send(Frame{FrameType::kSignal, 9, R"({"signal":9})"}));
  Frame exit = read(*conn_);
  ASSERT_EQ(exit.type, FrameType::kExit);
  EXPECT_EQ(*proto::decodeMessage<proto::ExitStatus>(exit.payload), proto::ExitStatus::signaled(9));

  ASSERT_TRUE(conn_->send(execFrame(0, {"true"})));
  EXPECT_EQ(expectError(*conn_, 0).code, "protocol");
}

TEST_F(ServerProtocolTest, OutputNeverExceedsTheGrantedWindow) {
  ASSERT_TRUE(conn_->handshake());
  constexpr uint64_t kTotal = 3u * proto::kInitialWindow + 12345;
  ASSERT_TRUE(conn_->send(execFrame(1, {"head", "-c", std::to_string(kTotal), "/dev/zero"})));
  ASSERT_EQ(read(*conn_).type, FrameType::kStarted);
  uint64_t granted = proto::kInitialWindow;
  uint64_t received = 0;
  while (true) {
    Frame frame = read(*conn_);
    ASSERT_EQ(frame.stream, 1u);
    if (frame.type == FrameType::kExit) break;
    ASSERT_EQ(frame.type, FrameType::kStdout);
    EXPECT_LE(frame.payload.size(), 64u * 1024);
    received += frame.payload.size();
    ASSERT_LE(received, granted);
    if (received == granted) {
      // Grant in small, odd steps.
      granted += 70001;
      ASSERT_TRUE(conn_->send(Frame{FrameType::kWindow, 1, proto::encodeWindow(70001)}));
    }
  }
  EXPECT_EQ(received, kTotal);
}

TEST_F(ServerProtocolTest, StdinBeyondTheWindowIsAStreamError) {
  ASSERT_TRUE(conn_->handshake());
  ASSERT_TRUE(conn_->send(execFrame(1, {"sleep", "1000"}, /*pipe_stdin=*/true)));
  Frame started = read(*conn_);
  ASSERT_EQ(started.type, FrameType::kStarted);
  auto message = proto::decodeMessage<proto::Started>(started.payload);
  ASSERT_TRUE(message);
  // Before any stdin the credit is exactly the initial window: one byte more is a violation.
  ASSERT_TRUE(
      conn_->send(Frame{FrameType::kStdin, 1, std::string(proto::kInitialWindow + 1, 'x')}));
  auto error = expectError(*conn_, 1);
  EXPECT_EQ(error.code, "protocol");
  EXPECT_NE(error.message.find("window"), std::string::npos) << error.message;
  EXPECT_TRUE(testing::waitForProcessGone(message->pid, kGone));
  // Other streams are unaffected.
  expectEchoWorks(*conn_, 2);
}

TEST_F(ServerProtocolTest, StdinIsGrantedBackAsTheChildReadsIt) {
  ASSERT_TRUE(conn_->handshake());
  ASSERT_TRUE(conn_->send(execFrame(1, {"wc", "-c"}, /*pipe_stdin=*/true)));
  ASSERT_EQ(read(*conn_).type, FrameType::kStarted);
  // 4 windows' worth, sent only as credit allows.
  constexpr uint64_t kTotal = 4u * proto::kInitialWindow;
  uint64_t sent = 0;
  uint64_t credit = proto::kInitialWindow;
  std::string out;
  while (sent < kTotal) {
    while (credit > 0 && sent < kTotal) {
      const size_t n = std::min<uint64_t>({credit, kTotal - sent, 65536});
      ASSERT_TRUE(conn_->send(Frame{FrameType::kStdin, 1, std::string(n, 'a')}));
      sent += n;
      credit -= n;
    }
    if (sent == kTotal) break;
    Frame frame = read(*conn_);
    ASSERT_EQ(frame.type, FrameType::kWindow) << frame.payload;
    credit += *proto::decodeWindow(frame.payload);
    ASSERT_LE(credit, proto::kInitialWindow);
  }
  ASSERT_TRUE(conn_->send(Frame{FrameType::kStdinEof, 1, ""}));
  while (true) {
    Frame frame = read(*conn_);
    if (frame.type == FrameType::kStdout) out += frame.payload;
    if (frame.type == FrameType::kExit) break;
  }
  EXPECT_EQ(out, std::to_string(kTotal) + "\n");
}

TEST_F(ServerProtocolTest, DisconnectKillsTheSessionsProcesses) {
  ASSERT_TRUE(conn_->handshake());
  const pid_t sleeper = startSleeper(*conn_, 1);
  ASSERT_GT(sleeper, 0);
  conn_->close();
  EXPECT_TRUE(testing::waitForProcessGone(sleeper, kGone));
  auto second = connect();
  ASSERT_TRUE(second->handshake());
  expectEchoWorks(*second, 1);
}

TEST_F(ServerProtocolTest, PoweroffInListenModeEndsTheAgent) {
  ASSERT_TRUE(conn_->handshake());
  const pid_t sleeper = startSleeper(*conn_, 1);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kPoweroff, 0, ""}));
  auto status = agent_->waitExit(kGone);
  ASSERT_TRUE(status) << status.error().describe();
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 0);
  EXPECT_TRUE(testing::waitForProcessGone(sleeper, kGone));
  auto frame = conn_->read();
  ASSERT_FALSE(frame);
  EXPECT_EQ(frame.error().code(), Errc::kUnavailable);
}

// What a tty stream sent: its output (granted back as it arrives) and how it ended.
struct TtyResult {
  std::string out;
  std::optional<proto::ExitStatus> exit;
  std::optional<proto::ErrorMessage> error;
  uint64_t stdin_granted = 0;
  bool saw_stderr = false;
};

class ServerTtyTest : public ServerProtocolTest {
 protected:
  void SetUp() override {
    ServerProtocolTest::SetUp();
    ASSERT_TRUE(conn_->handshake());
  }

  // Opens a tty stream; returns the process's pid.
  pid_t start(const Frame& exec) {
    EXPECT_TRUE(conn_->send(exec));
    Frame started = read(*conn_);
    EXPECT_EQ(started.type, FrameType::kStarted) << started.payload;
    auto message = proto::decodeMessage<proto::Started>(started.payload);
    return message ? message->pid : -1;
  }

  // Reads frames of stream id until its output contains needle (true) or the stream ends.
  bool readUntil(uint32_t id, const std::string& needle) {
    while (result_.out.find(needle, searched_) == std::string::npos) {
      if (!readOne(id)) return false;
    }
    searched_ = result_.out.find(needle, searched_) + needle.size();
    return true;
  }

  // Reads frames of stream id until it ends.
  TtyResult finish(uint32_t id) {
    while (readOne(id)) {
    }
    return result_;
  }

  // One frame; false once the stream has ended (or on a read error).
  bool readOne(uint32_t id) {
    if (result_.exit || result_.error) return false;
    auto frame = conn_->read();
    if (!frame) {
      ADD_FAILURE() << frame.error().describe() << "; output so far: " << result_.out;
      result_.error = proto::ErrorMessage{"test", "read failed"};
      return false;
    }
    EXPECT_EQ(frame->stream, id);
    switch (frame->type) {
      case FrameType::kStdout:
        result_.out += frame->payload;
        // Grant it back at once: these tests are not about flow control.
        EXPECT_TRUE(
            conn_->send(Frame{FrameType::kWindow, id,
                              proto::encodeWindow(static_cast<uint32_t>(frame->payload.size()))}));
        return true;
      case FrameType::kStderr: result_.saw_stderr = true; return true;
      case FrameType::kWindow:
        result_.stdin_granted += *proto::decodeWindow(frame->payload);
        return true;
      case FrameType::kExit:
        result_.exit = *proto::decodeMessage<proto::ExitStatus>(frame->payload);
        return false;
      case FrameType::kError:
        result_.error = *proto::decodeMessage<proto::ErrorMessage>(frame->payload);
        return false;
      default: ADD_FAILURE() << "unexpected frame type " << int(frame->type); return false;
    }
  }

  TtyResult result_;
  size_t searched_ = 0;
};

TEST_F(ServerTtyTest, TheProcessHasATerminalAndATerm) {
  ASSERT_GT(start(ttyFrame(1,
                           {"sh", "-c",
                            "test -t 0 && test -t 1 && test -t 2 && echo tty; echo $TERM; "
                            "echo to-stderr >&2"},
                           /*pipe_stdin=*/false)),
            0);
  TtyResult r = finish(1);
  EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
  // One merged stream, with the terminal's newline translation.
  EXPECT_EQ(r.out, "tty\r\nxterm-256color\r\nto-stderr\r\n");
  EXPECT_FALSE(r.saw_stderr);
}

TEST_F(ServerTtyTest, InitialSizeAndResize) {
  ASSERT_GT(start(ttyFrame(1, {"sh"}, true, 24, 80)), 0);
  ASSERT_TRUE(conn_->send(stdinFrame(1, "stty size\n")));
  ASSERT_TRUE(readUntil(1, "24 80\r\n")) << result_.out;
  ASSERT_TRUE(conn_->send(resizeFrame(1, 33, 101)));
  ASSERT_TRUE(conn_->send(stdinFrame(1, "stty size\n")));
  ASSERT_TRUE(readUntil(1, "33 101\r\n")) << result_.out;
  // The terminal's foreground job gets SIGWINCH.
  ASSERT_TRUE(conn_->send(
      stdinFrame(1,
                 "sh -c 'trap \"echo winch-$((40+2)); exit\" WINCH; echo armed-$((1+1)); "
                 "while :; do sleep 0.05; done'\n")));
  ASSERT_TRUE(readUntil(1, "armed-2")) << result_.out;
  ASSERT_TRUE(conn_->send(resizeFrame(1, 40, 120)));
  ASSERT_TRUE(readUntil(1, "winch-42")) << result_.out;
  ASSERT_TRUE(conn_->send(stdinFrame(1, "exit 7\n")));
  TtyResult r = finish(1);
  EXPECT_EQ(r.exit, proto::ExitStatus::exited(7)) << r.out;
}

TEST_F(ServerTtyTest, CtrlCInterruptsTheForegroundProcess) {
  // A process on its own: ^C kills it with SIGINT.
  ASSERT_GT(start(ttyFrame(1, {"sleep", "100"})), 0);
  ASSERT_TRUE(conn_->send(stdinFrame(1, "\x03")));
  EXPECT_EQ(finish(1).exit, proto::ExitStatus::signaled(SIGINT));

  // An interactive shell: ^C ends its foreground job and the shell prompts again.
  result_ = {};
  searched_ = 0;
  const pid_t shell = start(ttyFrame(2, {"sh"}));
  ASSERT_GT(shell, 0);
  ASSERT_TRUE(conn_->send(stdinFrame(2, "sleep 100\n")));
  const pid_t sleeper = waitForChild(shell, "sleep", kGone);
  ASSERT_GT(sleeper, 0);
  ASSERT_TRUE(conn_->send(stdinFrame(2, "\x03")));
  EXPECT_TRUE(testing::waitForProcessGone(sleeper, kGone));
  ASSERT_TRUE(conn_->send(stdinFrame(2, "echo back-$((2+3))\n")));
  ASSERT_TRUE(readUntil(2, "back-5")) << result_.out;
  // kSignal reaches the foreground job too.
  ASSERT_TRUE(conn_->send(stdinFrame(2, "sleep 100\n")));
  const pid_t second = waitForChild(shell, "sleep", kGone);
  ASSERT_GT(second, 0);
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kSignal, 2, proto::SignalRequest{SIGINT})));
  EXPECT_TRUE(testing::waitForProcessGone(second, kGone));
  ASSERT_TRUE(conn_->send(stdinFrame(2, "exit 3\n")));
  EXPECT_EQ(finish(2).exit, proto::ExitStatus::exited(3)) << result_.out;
}

TEST_F(ServerTtyTest, StdinEofIsTheTerminalsEofCharacter) {
  ASSERT_GT(start(ttyFrame(1, {"cat"})), 0);
  ASSERT_TRUE(conn_->send(stdinFrame(1, "hello\n")));
  ASSERT_TRUE(conn_->send(Frame{FrameType::kStdinEof, 1, ""}));
  TtyResult r = finish(1);
  EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
  EXPECT_EQ(r.out, "hello\r\nhello\r\n");  // the echo, then cat's copy
  EXPECT_EQ(r.stdin_granted, 6u);          // the ^D the agent added is not granted back

  // After an unterminated line one ^D only hands the line over: the agent sends two.
  result_ = {};
  ASSERT_GT(start(ttyFrame(2, {"cat"})), 0);
  ASSERT_TRUE(conn_->send(stdinFrame(2, "abc")));
  ASSERT_TRUE(conn_->send(Frame{FrameType::kStdinEof, 2, ""}));
  r = finish(2);
  EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
  EXPECT_EQ(r.out, "abcabc");
  EXPECT_EQ(r.stdin_granted, 3u);
}

TEST_F(ServerTtyTest, OutputIsCompleteWhenTheProcessExits) {
  std::string expected;
  for (int i = 1; i <= 50000; ++i) expected += std::to_string(i) + "\r\n";
  for (uint32_t id = 1; id <= 5; ++id) {
    result_ = {};
    ASSERT_GT(start(ttyFrame(id, {"seq", "50000"}, /*pipe_stdin=*/false)), 0);
    TtyResult r = finish(id);
    EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
    ASSERT_EQ(r.out.size(), expected.size()) << "run " << id;
    EXPECT_TRUE(r.out == expected) << "run " << id;
  }
}

TEST_F(ServerTtyTest, ABackgroundJobHoldingTheTerminalDoesNotHoldTheStream) {
  ASSERT_GT(start(ttyFrame(1, {"sh", "-c", "trap '' HUP; sleep 600 & echo $!"}, false)), 0);
  TtyResult r = finish(1);
  EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
  const int background = std::atoi(r.out.c_str());
  ASSERT_GT(background, 0) << r.out;
  ::kill(background, SIGKILL);
}

TEST_F(ServerTtyTest, ResizeRules) {
  // Ignored on a stream without a terminal.
  ASSERT_TRUE(conn_->send(execFrame(1, {"sh", "-c", "read x; echo got-$x"}, true)));
  ASSERT_EQ(read(*conn_).type, FrameType::kStarted);
  ASSERT_TRUE(conn_->send(resizeFrame(1, 10, 10)));
  ASSERT_TRUE(conn_->send(stdinFrame(1, "it\n")));
  TtyResult r = finish(1);
  EXPECT_EQ(r.exit, proto::ExitStatus::exited(0));
  EXPECT_EQ(r.out, "got-it\n");
  // A malformed size is a stream error.
  result_ = {};
  const pid_t pid = start(ttyFrame(2, {"sleep", "100"}));
  ASSERT_TRUE(conn_->send(Frame{FrameType::kResize, 2, R"({"rows":24})"}));
  r = finish(2);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->code, "protocol");
  EXPECT_TRUE(testing::waitForProcessGone(pid, kGone));
  expectEchoWorks(*conn_, 3);
}

}  // namespace
}  // namespace hutch::agent

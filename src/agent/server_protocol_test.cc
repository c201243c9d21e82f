// The agent's protocol rules, driven with raw frames over its --listen socket: the handshake,
// errors and session resets, and flow-control limits that a well-behaved client never tests.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <string>

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
  for (const char* capability : {"exec", "signal", "window", "poweroff"}) {
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
  ASSERT_TRUE(conn_->send(Frame{FrameType::kExec, 5, R"({"argv":["sh"],"tty":true})"}));
  EXPECT_EQ(expectError(*conn_, 5).code, "unsupported");
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

}  // namespace
}  // namespace hutch::agent

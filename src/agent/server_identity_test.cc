// kIdentity through the real agent (--listen with --root: files under a temp root, the
// clock, hostname, RNG and disk operations only recorded), and the session recovery a restored
// snapshot needs: a new host's kHello while the decoder holds half a frame of the previous one.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "agent/testing/agent_process.h"
#include "agent/testing/raw_connection.h"
#include "proto/identity.h"
#include "proto/messages.h"
#include "proto/processes.h"

namespace hutch::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using proto::Frame;
using proto::FrameType;
using testing::AgentProcess;
using testing::RawConnection;

const std::string kMachineId = "0123456789abcdef0123456789abcdef";

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p);
  out << text;
}

Frame identityFrame(uint32_t stream, const proto::Identity& identity) {
  return proto::makeFrame(FrameType::kIdentity, stream, identity);
}

class ServerIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::prepare();
    ASSERT_TRUE(agent) << agent.error().describe();
    agent_ = std::move(*agent);
    root_ = agent_->dir() + "/root";
    spit(root_ + "/etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\ttemplate\n");
    spit(root_ + "/etc/hostname", "template\n");
    spit(root_ + "/etc/machine-id", "ffffffffffffffffffffffffffffffff\n");
    ASSERT_TRUE(agent_->launch({"--root", root_}));
    auto fd = agent_->connect();
    ASSERT_TRUE(fd) << fd.error().describe();
    conn_ = std::make_unique<RawConnection>(std::move(*fd));
    ASSERT_TRUE(conn_->handshake());
  }

  Frame read() {
    auto frame = conn_->read();
    EXPECT_TRUE(frame) << frame.error().describe();
    return frame ? *frame : Frame{FrameType::kError, 0xffffffff, "{}"};
  }

  proto::ErrorMessage expectError(uint32_t stream) {
    Frame frame = read();
    EXPECT_EQ(frame.type, FrameType::kError) << frame.payload;
    EXPECT_EQ(frame.stream, stream);
    auto error = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
    return error ? *error : proto::ErrorMessage{};
  }

  proto::IdentityResult expectResult(uint32_t stream) {
    Frame frame = read();
    EXPECT_EQ(frame.type, FrameType::kResult) << frame.payload;
    EXPECT_EQ(frame.stream, stream);
    auto result = proto::decodeMessage<proto::IdentityResult>(frame.payload);
    EXPECT_TRUE(result) << frame.payload;
    return result ? *result : proto::IdentityResult{};
  }

  std::string systemLog() { return slurp(root_ + "/system.log"); }

  std::unique_ptr<AgentProcess> agent_;
  std::string root_;
  std::unique_ptr<RawConnection> conn_;
};

TEST_F(ServerIdentityTest, TheCapabilityIsAdvertised) {
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kHello, 0, proto::Hello{1, "test"})));
  Frame ack = read();
  ASSERT_EQ(ack.type, FrameType::kHelloAck);
  EXPECT_TRUE(proto::decodeMessage<proto::HelloAck>(ack.payload)->hasCapability("identity"));
}

TEST_F(ServerIdentityTest, AppliesTheIdentityAndAnswersOnItsStream) {
  proto::Identity identity{"clone-1", kMachineId, 1700000000000000001, std::string(96, 'b'), false};
  ASSERT_TRUE(conn_->send(identityFrame(3, identity)));
  EXPECT_EQ(expectResult(3), proto::IdentityResult{});
  EXPECT_EQ(systemLog(), "clock 1700000000000000001\nseed " + std::string(96, 'b') +
                             "\nmachine_id\nhostname clone-1\n");
  EXPECT_EQ(slurp(root_ + "/etc/hostname"), "clone-1\n");
  EXPECT_EQ(slurp(root_ + "/etc/hosts"), "127.0.0.1\tlocalhost\n127.0.1.1\tclone-1\n");
  EXPECT_EQ(slurp(root_ + "/etc/machine-id"), kMachineId + "\n");
  // Again, on a new stream, with another name: replaced, not appended.
  identity.hostname = "clone-2";
  ASSERT_TRUE(conn_->send(identityFrame(4, identity)));
  EXPECT_EQ(expectResult(4), proto::IdentityResult{});
  EXPECT_EQ(slurp(root_ + "/etc/hosts"), "127.0.0.1\tlocalhost\n127.0.1.1\tclone-2\n");
}

TEST_F(ServerIdentityTest, BadRequestsAreStreamErrors) {
  ASSERT_TRUE(conn_->send(Frame{FrameType::kIdentity, 1, R"({"hostname":"bad_name"})"}));
  EXPECT_EQ(expectError(1).code, "invalid_argument");
  ASSERT_TRUE(conn_->send(Frame{FrameType::kIdentity, 2, R"({"machine_id":"ABC"})"}));
  EXPECT_EQ(expectError(2).code, "invalid_argument");
  ASSERT_TRUE(conn_->send(Frame{FrameType::kIdentity, 3, "{not json"}));
  EXPECT_EQ(expectError(3).code, "protocol");
  EXPECT_FALSE(fs::exists(root_ + "/system.log"));  // nothing was applied
  // The session goes on.
  ASSERT_TRUE(conn_->send(identityFrame(4, proto::Identity{"ok", "", std::nullopt, "", false})));
  expectResult(4);
  // Stream 0 breaks the protocol.
  ASSERT_TRUE(conn_->send(identityFrame(0, proto::Identity{})));
  EXPECT_EQ(expectError(0).code, "protocol");
}

TEST_F(ServerIdentityTest, FailuresComeBackAsErrors) {
  fs::remove_all(root_ + "/etc");
  ASSERT_TRUE(conn_->send(identityFrame(1, proto::Identity{"web", kMachineId, 7, "", false})));
  const auto error = expectError(1);
  EXPECT_EQ(error.code, "not_found");  // ENOENT
  EXPECT_NE(error.message.find("machine-id"), std::string::npos) << error.message;
  EXPECT_EQ(systemLog(), "clock 7\nhostname web\n");  // the rest was still applied
}

TEST_F(ServerIdentityTest, GrowRootWaitsForTheDiskAndServesOthersMeanwhile) {
  ASSERT_TRUE(conn_->send(identityFrame(5, proto::Identity{"", "", std::nullopt, "", true})));
  // Not answered yet: the "disk" has not grown. Other requests are served meanwhile.
  ASSERT_TRUE(conn_->send(Frame{FrameType::kPing, 0, "p"}));
  Frame pong = read();
  EXPECT_EQ(pong.type, FrameType::kPong);
  std::this_thread::sleep_for(300ms);
  spit(root_ + "/disk-grown", "");
  EXPECT_EQ(expectResult(5), (proto::IdentityResult{512 * 4096, true}));
  EXPECT_EQ(systemLog(), "grow_root\n");
}

TEST_F(ServerIdentityTest, GrowRootWithoutANewDiskSizeAnswersAfterTheWait) {
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(conn_->send(identityFrame(5, proto::Identity{"w", "", std::nullopt, "", true})));
  EXPECT_EQ(expectResult(5), (proto::IdentityResult{256 * 4096, false}));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2900ms);
  EXPECT_EQ(systemLog(), "hostname w\n");
}

TEST_F(ServerIdentityTest, AStreamWaitingForTheDiskIsInUseAndANewSessionDropsIt) {
  ASSERT_TRUE(conn_->send(identityFrame(5, proto::Identity{"", "", std::nullopt, "", true})));
  ASSERT_TRUE(conn_->send(identityFrame(5, proto::Identity{})));
  EXPECT_EQ(expectError(5).code, "already_exists");
  // A new session forgets the request: its answer never comes.
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kHello, 0, proto::Hello{1, "test"})));
  EXPECT_EQ(read().type, FrameType::kHelloAck);
  spit(root_ + "/disk-grown", "");
  auto late = conn_->read(500ms);
  EXPECT_FALSE(late) << "unexpected frame type " << int(late->type);
}

TEST(ServerIdentityUnsupportedTest, WithoutAnIdentityRootTheRequestIsRefused) {
  auto agent = AgentProcess::start();
  ASSERT_TRUE(agent) << agent.error().describe();
  auto fd = (*agent)->connect();
  ASSERT_TRUE(fd);
  RawConnection conn(std::move(*fd));
  ASSERT_TRUE(conn.send(proto::makeFrame(FrameType::kHello, 0, proto::Hello{1, "test"})));
  auto ack = conn.read();
  ASSERT_TRUE(ack);
  ASSERT_EQ(ack->type, FrameType::kHelloAck);
  EXPECT_FALSE(proto::decodeMessage<proto::HelloAck>(ack->payload)->hasCapability("identity"));
  ASSERT_TRUE(conn.send(identityFrame(1, proto::Identity{"x", "", std::nullopt, "", false})));
  auto error = conn.read();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->type, FrameType::kError);
  EXPECT_EQ(proto::decodeMessage<proto::ErrorMessage>(error->payload)->code, "unsupported");
}

// After a restore the agent's memory is the snapshot's: its decoder may hold the first part of a
// frame the old host never finished. The new host's kHello (one write, so one read) must start a
// session instead of being swallowed as that frame's payload.
TEST_F(ServerIdentityTest, AHelloAfterHalfAFrameOfThePreviousHostStartsANewSession) {
  // A sleeper of the "old host", then half of a kStdin frame that claims 100000 bytes.
  proto::ExecRequest sleeper;
  sleeper.argv = {"sleep", "1000"};
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kExec, 9, sleeper)));
  Frame started = read();
  ASSERT_EQ(started.type, FrameType::kStarted);
  const int pid = proto::decodeMessage<proto::Started>(started.payload)->pid;
  std::string half = proto::encodeFrame(Frame{FrameType::kStdin, 9, std::string(100000, 'x')});
  half.resize(5000);
  ASSERT_TRUE(conn_->sendBytes(half));
  std::this_thread::sleep_for(200ms);  // the agent has read it: a separate read from the hello

  ASSERT_TRUE(conn_->sendBytes(
      proto::encodeFrame(proto::makeFrame(FrameType::kHello, 0, proto::Hello{1, "new host"}))));
  Frame ack = read();
  EXPECT_EQ(ack.type, FrameType::kHelloAck);
  // The old host's process goes on without it, as a detached process (docs/protocol.md).
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(::kill(pid, 0), 0) << "the old session's process was killed";
  ASSERT_TRUE(conn_->send(Frame{FrameType::kProcesses, 3, ""}));
  Frame listed = read();
  ASSERT_EQ(listed.type, FrameType::kResult);
  auto processes = proto::decodeMessage<proto::ProcessList>(listed.payload);
  ASSERT_TRUE(processes);
  ASSERT_EQ(processes->processes.size(), 1u);
  EXPECT_EQ(processes->processes[0].pid, pid);
  EXPECT_EQ(processes->processes[0].argv, sleeper.argv);
  ::kill(pid, SIGKILL);
  EXPECT_TRUE(testing::waitForProcessGone(pid, 30s));
  // Frames decode in step again.
  ASSERT_TRUE(conn_->send(identityFrame(1, proto::Identity{"after", "", std::nullopt, "", false})));
  expectResult(1);
}

// The same bytes inside one read are data, not a new host: a kHello in a stdin payload.
TEST_F(ServerIdentityTest, HelloBytesInsideAFrameAreData) {
  proto::ExecRequest cat;
  cat.argv = {"cat"};
  cat.pipe_stdin = true;
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kExec, 2, cat)));
  ASSERT_EQ(read().type, FrameType::kStarted);
  const std::string hello =
      proto::encodeFrame(proto::makeFrame(FrameType::kHello, 0, proto::Hello{1, "x"}));
  ASSERT_TRUE(conn_->send(Frame{FrameType::kStdin, 2, hello}));
  ASSERT_TRUE(conn_->send(Frame{FrameType::kStdinEof, 2, ""}));
  std::string out;
  while (true) {
    Frame frame = read();
    ASSERT_EQ(frame.stream, 2u) << int(frame.type);
    if (frame.type == FrameType::kStdout) out += frame.payload;
    if (frame.type == FrameType::kWindow) continue;
    if (frame.type == FrameType::kExit) break;
  }
  EXPECT_EQ(out, hello);
}

}  // namespace
}  // namespace hutch::agent

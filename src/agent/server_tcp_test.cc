// TCP streams' protocol rules, driven with raw frames over the agent's --listen socket (the
// well-behaved paths are in src/guest/agent_client_tcp_test.cc).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "agent/testing/agent_process.h"
#include "agent/testing/raw_connection.h"
#include "proto/messages.h"
#include "proto/tcp.h"

namespace hutch::agent {
namespace {

using proto::Frame;
using proto::FrameType;
using testing::AgentProcess;
using testing::RawConnection;

// A listening loopback socket; accept() blocks.
class Listener {
 public:
  Listener() {
    fd_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_.get(), 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  uint16_t port() const { return port_; }
  UniqueFd accept() { return UniqueFd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC)); }

 private:
  UniqueFd fd_;
  uint16_t port_ = 0;
};

class ServerTcpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::start();
    ASSERT_TRUE(agent) << agent.error().describe();
    agent_ = std::move(*agent);
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

  // Opens stream id to the listener; returns the accepted socket.
  UniqueFd open(uint32_t id) {
    EXPECT_TRUE(conn_->send(proto::makeFrame(
        FrameType::kConnect, id, proto::ConnectRequest{listener_.port(), "127.0.0.1"})));
    Frame connected = read();
    EXPECT_EQ(connected.type, FrameType::kConnected) << connected.payload;
    EXPECT_EQ(connected.stream, id);
    return listener_.accept();
  }

  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<RawConnection> conn_;
  Listener listener_;
};

TEST_F(ServerTcpTest, DataBeyondTheWindowIsAStreamError) {
  UniqueFd peer = open(3);
  ASSERT_TRUE(peer);
  // One frame larger than the whole initial window.
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 3, std::string(proto::kInitialWindow + 1, 'x')}));
  while (true) {
    Frame frame = read();
    ASSERT_EQ(frame.stream, 3u);
    if (frame.type == FrameType::kWindow) continue;
    ASSERT_EQ(frame.type, FrameType::kError) << int(frame.type);
    EXPECT_EQ(proto::decodeMessage<proto::ErrorMessage>(frame.payload)->code, "protocol");
    break;
  }
  // The peer sees a reset, not a clean end.
  char byte;
  ssize_t n;
  do {
    n = ::read(peer.get(), &byte, 1);
  } while (n > 0);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(errno, ECONNRESET);
}

TEST_F(ServerTcpTest, HostCloseIsAnsweredAndResetsThePeer) {
  UniqueFd peer = open(5);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kClose, 5, ""}));
  Frame closed = read();
  EXPECT_EQ(closed.type, FrameType::kClose);
  EXPECT_EQ(closed.stream, 5u);
  char byte;
  EXPECT_EQ(::read(peer.get(), &byte, 1), -1);
  EXPECT_EQ(errno, ECONNRESET);
  // Frames for the closed stream are ignored; the id is free again.
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 5, "late"}));
  ASSERT_TRUE(conn_->send(Frame{FrameType::kEof, 5, ""}));
  UniqueFd again = open(5);
  EXPECT_TRUE(again);
}

TEST_F(ServerTcpTest, AnOpenIdIsRefusedAndANewSessionResetsConnections) {
  UniqueFd peer = open(7);
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kConnect, 7,
                                           proto::ConnectRequest{listener_.port(), "127.0.0.1"})));
  Frame refused = read();
  EXPECT_EQ(refused.type, FrameType::kError);
  EXPECT_EQ(proto::decodeMessage<proto::ErrorMessage>(refused.payload)->code, "already_exists");
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kHello, 0, proto::Hello{1, "new"})));
  EXPECT_EQ(read().type, FrameType::kHelloAck);
  char byte;
  EXPECT_EQ(::read(peer.get(), &byte, 1), -1);
  EXPECT_EQ(errno, ECONNRESET);
}

TEST_F(ServerTcpTest, EndOfFileBothWaysEndsTheStreamWithClose) {
  UniqueFd peer = open(9);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 9, "ping"}));
  ASSERT_TRUE(conn_->send(Frame{FrameType::kEof, 9, ""}));
  std::string got;
  char buffer[16];
  ssize_t n;
  while ((n = ::read(peer.get(), buffer, sizeof buffer)) > 0) got.append(buffer, n);
  EXPECT_EQ(n, 0);  // the host's kEof is the peer's end of file
  EXPECT_EQ(got, "ping");
  ASSERT_EQ(::write(peer.get(), "pong", 4), 4);
  ::shutdown(peer.get(), SHUT_WR);
  std::string data;
  bool eof = false;
  while (true) {
    Frame frame = read();
    ASSERT_EQ(frame.stream, 9u);
    if (frame.type == FrameType::kWindow) continue;
    if (frame.type == FrameType::kData) data += frame.payload;
    if (frame.type == FrameType::kEof) eof = true;
    if (frame.type == FrameType::kClose) break;
    ASSERT_NE(frame.type, FrameType::kError) << frame.payload;
  }
  EXPECT_EQ(data, "pong");
  EXPECT_TRUE(eof);
}

// What a suspend does: kPark, the host goes away, a new host says hello and resumes the stream
// under a new id. Nothing sent either way is lost, and the peer in the box never noticed.
TEST_F(ServerTcpTest, AParkedStreamOutlivesTheSessionAndGoesOnUnderANewId) {
  UniqueFd peer = open(3);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 3, "before"}));
  char buffer[64];
  ASSERT_EQ(::read(peer.get(), buffer, 6), 6);
  EXPECT_EQ(std::string(buffer, 6), "before");
  // Data the host sent just before kPark is still written; the peer's data is not read.
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 3, "last"}));
  ASSERT_TRUE(conn_->send(Frame{FrameType::kPark, 10, "{}"}));
  Frame parked = read();
  while (parked.type == FrameType::kWindow && parked.stream == 3) parked = read();
  ASSERT_EQ(parked.type, FrameType::kResult) << parked.payload;
  EXPECT_EQ(parked.stream, 10u);
  EXPECT_EQ(*proto::decodeMessage<proto::ParkResult>(parked.payload), proto::ParkResult{{3}});
  ASSERT_EQ(::write(peer.get(), "while parked", 12), 12);
  // Nothing comes for stream 3 now (a ping proves the agent read on after its answer).
  ASSERT_TRUE(conn_->send(Frame{FrameType::kPing, 0, "p"}));
  Frame pong = read();
  EXPECT_EQ(pong.type, FrameType::kPong) << int(pong.type) << " on " << pong.stream;

  // The host goes away (QEMU exits after the suspend); a new one connects.
  conn_->close();
  auto fd = agent_->connect();
  ASSERT_TRUE(fd) << fd.error().describe();
  conn_ = std::make_unique<RawConnection>(std::move(*fd));
  ASSERT_TRUE(conn_->handshake());
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kResume, 1, proto::ResumeRequest{3})));
  Frame resumed = read();
  ASSERT_EQ(resumed.type, FrameType::kConnected) << resumed.payload;
  EXPECT_EQ(resumed.stream, 1u);
  std::string data;
  while (data.size() < 12) {
    Frame frame = read();
    ASSERT_EQ(frame.stream, 1u) << int(frame.type);
    ASSERT_NE(frame.type, FrameType::kError) << frame.payload;
    if (frame.type == FrameType::kData) data += frame.payload;
  }
  EXPECT_EQ(data, "while parked");
  ASSERT_EQ(::read(peer.get(), buffer, 4), 4);
  EXPECT_EQ(std::string(buffer, 4), "last");
  // Both ways on the new id, to the end.
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 1, "after"}));
  ASSERT_TRUE(conn_->send(Frame{FrameType::kEof, 1, ""}));
  std::string got;
  ssize_t n;
  while ((n = ::read(peer.get(), buffer, sizeof buffer)) > 0) got.append(buffer, n);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(got, "after");
  ::shutdown(peer.get(), SHUT_WR);
  while (true) {
    Frame frame = read();
    ASSERT_EQ(frame.stream, 1u);
    ASSERT_NE(frame.type, FrameType::kError) << frame.payload;
    if (frame.type == FrameType::kClose) break;
  }
  // Resumed once: a second resume of the old id finds nothing.
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kResume, 2, proto::ResumeRequest{3})));
  Frame again = read();
  EXPECT_EQ(again.type, FrameType::kError);
  EXPECT_EQ(again.stream, 2u);
  EXPECT_EQ(proto::decodeMessage<proto::ErrorMessage>(again.payload)->code, "not_found");
}

// The peer resets the connection while the stream is parked: resuming the stream finds it
// ended with the error, on the new id.
TEST_F(ServerTcpTest, AStreamResetWhileParkedReportsItWhenResumed) {
  UniqueFd peer = open(4);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kPark, 11, "{}"}));
  ASSERT_EQ(read().type, FrameType::kResult);
  linger hard{1, 0};
  ::setsockopt(peer.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  peer.reset();
  ASSERT_TRUE(conn_->send(Frame{FrameType::kPing, 0, ""}));
  EXPECT_EQ(read().type, FrameType::kPong);  // nothing for stream 4 in between
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kResume, 12, proto::ResumeRequest{4})));
  EXPECT_EQ(read().type, FrameType::kConnected);
  while (true) {
    Frame frame = read();
    ASSERT_EQ(frame.stream, 12u) << int(frame.type);
    if (frame.type == FrameType::kWindow) continue;
    EXPECT_EQ(frame.type, FrameType::kError) << int(frame.type);
    EXPECT_EQ(proto::decodeMessage<proto::ErrorMessage>(frame.payload)->code, "unavailable");
    break;
  }
}

}  // namespace
}  // namespace hutch::agent

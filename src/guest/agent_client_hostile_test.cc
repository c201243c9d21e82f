// AgentClient against a hostile agent (a scripted fake on a unix socket): one that never starts
// what it is asked to, one that grants huge stdin windows and stops reading, one that pings and
// does not read the answers. The client must neither wait forever nor queue without bound.
// tests/e2e/hostile_test.cc does the same with a real box and hutchd.
#include <gtest/gtest.h>
#include <signal.h>

#include <functional>

#include "guest/agent_client.h"
#include "guest/asio.h"
#include "guest/testing/client_test_support.h"
#include "proto/messages.h"

namespace hutch::guest {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace testing;
using proto::Frame;
using proto::FrameType;

// Answers kHello, then hands every frame to `on_frame`, which returns the bytes to answer with
// (sent at once) and whether to go on reading; once it says no the fake never reads again, and
// sends `after` (the bytes it returned) regardless.
class HostileAgent {
 public:
  using OnFrame = std::function<std::string(const Frame&, bool& keep_reading)>;

  HostileAgent(asio::io_context& io, std::string path, OnFrame on_frame)
      : acceptor_(io, asio::local::stream_protocol::endpoint(path)),
        on_frame_(std::move(on_frame)) {}

  asio::awaitable<void> serve() {
    auto socket = co_await acceptor_.async_accept(asio::use_awaitable);
    proto::FrameDecoder decoder;
    char buffer[4096];
    bool keep_reading = true;
    while (keep_reading) {
      boost::system::error_code ec;
      size_t n = co_await socket.async_read_some(asio::buffer(buffer),
                                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      decoder.feed(std::span<const char>(buffer, n));
      while (keep_reading) {
        auto frame = decoder.next();
        if (!frame || !*frame) break;
        std::string reply;
        if ((*frame)->type == FrameType::kHello) {
          proto::encodeFrame(
              proto::makeFrame(FrameType::kHelloAck, 0, proto::HelloAck{1, "hostile", {"exec"}}),
              reply);
        } else {
          frames_.push_back(**frame);
          reply = on_frame_(**frame, keep_reading);
        }
        if (!reply.empty()) {
          co_await asio::async_write(socket, asio::buffer(reply),
                                     asio::redirect_error(asio::use_awaitable, ec));
          if (ec) co_return;
        }
      }
    }
    // Deaf from here on: the socket stays open, nothing more is read.
    socket_ = std::make_unique<asio::local::stream_protocol::socket>(std::move(socket));
  }

  const std::vector<Frame>& frames() const { return frames_; }

 private:
  asio::local::stream_protocol::acceptor acceptor_;
  OnFrame on_frame_;
  std::vector<Frame> frames_;
  std::unique_ptr<asio::local::stream_protocol::socket> socket_;
};

std::string frame(FrameType type, uint32_t stream, std::string payload) {
  return proto::encodeFrame(Frame{type, stream, std::move(payload)});
}

class HostileAgentTest : public AgentClientTest {
 protected:
  // (No default argument: GCC 12 destroys a coroutine's defaulted class argument twice.)
  asio::awaitable<std::shared_ptr<AgentClient>> connectTo(std::string path,
                                                          AgentClientOptions options) {
    auto channel =
        co_await connectUnix(io_.get_executor(), path, std::chrono::steady_clock::now() + 30s);
    EXPECT_TRUE(channel);
    if (!channel) co_return nullptr;
    auto client = AgentClient::create(std::move(*channel), options);
    clients_.push_back(client);
    auto ack = co_await client->handshake(30s);
    EXPECT_TRUE(ack);
    co_return client;
  }

  asio::awaitable<void> sleep(std::chrono::milliseconds d) {
    asio::steady_timer timer(io_, d);
    co_await timer.async_wait(asio::use_awaitable);
  }
};

// An agent that takes kExec and answers nothing (it sent half a frame, or hung): exec() gives
// up at its deadline instead of waiting forever, and kills the process should it start late.
TEST_F(HostileAgentTest, ExecGivesUpOnAnAgentThatNeverStartsIt) {
  const std::string path = agent_->dir() + "/never.sock";
  HostileAgent fake(io_, path, [](const Frame& f, bool&) -> std::string {
    if (f.type == FrameType::kPing) return frame(FrameType::kPong, 0, f.payload);
    return {};
  });
  asio::co_spawn(io_, fake.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    AgentClientOptions options;
    options.exec_start_timeout = 300ms;
    auto client = co_await connectTo(path, options);
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest request = command({"true"});
    auto exec = co_await client->exec(request);
    CO_ASSERT_FALSE(exec);
    EXPECT_EQ(exec.error().code(), Errc::kTimeout);
    EXPECT_NE(exec.error().message().find("did not start"), std::string::npos);
    // The connection is fine; the given-up stream was told to die.
    EXPECT_TRUE(co_await client->ping(30s));
    bool killed = false;
    for (const Frame& f : fake.frames()) {
      if (f.type == FrameType::kSignal && f.stream == 1 &&
          f.payload == proto::encodeMessage(proto::SignalRequest{SIGKILL})) {
        killed = true;
      }
    }
    EXPECT_TRUE(killed);
  });
}

// An agent that starts the process, grants 16 GiB of stdin window and stops reading: stdin is
// held back once kWriteHighWater bytes are queued, instead of all of it going into the queue.
TEST_F(HostileAgentTest, StdinWaitsForAnAgentThatGrantsWindowAndDoesNotRead) {
  const std::string path = agent_->dir() + "/deaf.sock";
  HostileAgent fake(io_, path, [](const Frame& f, bool& keep_reading) -> std::string {
    if (f.type != FrameType::kExec) return {};
    keep_reading = false;
    std::string reply = frame(FrameType::kStarted, f.stream, R"({"pid":7})");
    for (int i = 0; i < 4; ++i) {
      reply += frame(FrameType::kWindow, f.stream, proto::encodeWindow(0xffffffffu));
    }
    return reply;
  });
  asio::co_spawn(io_, fake.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    const AgentClientOptions options;
    auto client = co_await connectTo(path, options);
    CO_ASSERT_TRUE(client);
    const proto::ExecRequest request = command({"cat"}, /*pipe_stdin=*/true);
    auto session = co_await client->exec(request);
    CO_ASSERT_TRUE(session);
    co_await sleep(100ms);  // the grants arrive
    const std::string input(size_t{64} << 20, 'i');
    bool written = false;
    asio::co_spawn(
        io_,
        [&, s = *session]() -> asio::awaitable<void> {
          (void)co_await s->writeStdin(input);
          written = true;
        },
        asio::detached);
    size_t most = 0;
    for (int i = 0; i < 20; ++i) {
      co_await sleep(25ms);
      most = std::max(most, client->queued());
    }
    EXPECT_FALSE(written);
    EXPECT_LE(most, AgentClient::kWriteHighWater + 64 * 1024 + 1024);
    EXPECT_TRUE(client->isOpen());
    client->close();  // the waiting writer ends with the connection
    for (int i = 0; i < 20 && !written; ++i) co_await sleep(10ms);
    EXPECT_TRUE(written);
  });
}

// An agent that stops reading and pings with 1 MiB payloads: the pongs it asks for cannot be
// delivered, so once kMaxQueued bytes wait for it the client closes the connection, saying why,
// rather than queue every answer.
TEST_F(HostileAgentTest, AnAgentThatPingsAndDoesNotReadIsDisconnected) {
  const std::string path = agent_->dir() + "/pings.sock";
  HostileAgent fake(io_, path, [](const Frame& f, bool& keep_reading) -> std::string {
    if (f.type != FrameType::kPing) return {};
    keep_reading = false;
    std::string pings;
    for (int i = 0; i < 48; ++i) pings += frame(FrameType::kPing, 0, std::string(1u << 20, 'P'));
    return pings;
  });
  asio::co_spawn(io_, fake.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    const AgentClientOptions options;
    auto client = co_await connectTo(path, options);
    CO_ASSERT_TRUE(client);
    (void)co_await client->ping(50ms);  // sets the fake off
    const Error why = co_await client->closed();
    EXPECT_EQ(why.code(), Errc::kUnavailable);
    EXPECT_NE(why.message().find("does not read"), std::string::npos) << why.message();
  });
}

}  // namespace
}  // namespace hutch::guest

// TCP streams (port forwarding) through AgentClient and the real agent (--listen): the agent
// connects to servers this test runs on the loopback interface.
#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include "guest/agent_client.h"
#include "guest/testing/client_test_support.h"

namespace hutch::guest {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;
using namespace testing;

using Handler = std::function<asio::awaitable<void>(tcp::socket)>;

// A loopback server: every accepted connection is served by its own coroutine.
class LoopbackServer {
 public:
  LoopbackServer(asio::io_context& io, Handler handler)
      : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        handler_(std::move(handler)) {
    asio::co_spawn(io, accept(), asio::detached);
  }
  ~LoopbackServer() {
    boost::system::error_code ec;
    acceptor_.close(ec);
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int accepted() const { return accepted_; }

 private:
  asio::awaitable<void> accept() {
    while (acceptor_.is_open()) {
      boost::system::error_code ec;
      tcp::socket socket =
          co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      ++accepted_;
      asio::co_spawn(acceptor_.get_executor(), handler_(std::move(socket)), asio::detached);
    }
  }

  tcp::acceptor acceptor_;
  Handler handler_;
  int accepted_ = 0;
};

// Echoes everything; shuts its sending side down at end of file.
asio::awaitable<void> echo(tcp::socket socket) {
  std::vector<char> buffer(64 * 1024);
  while (true) {
    boost::system::error_code ec;
    const size_t n = co_await socket.async_read_some(asio::buffer(buffer),
                                                     asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    co_await asio::async_write(socket, asio::buffer(buffer.data(), n),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
  }
  boost::system::error_code ec;
  socket.shutdown(tcp::socket::shutdown_send, ec);
}

asio::awaitable<void> sleepFor(std::chrono::milliseconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(asio::use_awaitable);
}

// Reads until end of file; the bytes, or the error.
asio::awaitable<Result<std::string>> readAll(TcpStream& stream) {
  std::string all;
  while (true) {
    auto bytes = co_await stream.read();
    if (!bytes) co_return fail(bytes.error());
    if (bytes->empty()) co_return all;
    all += *bytes;
  }
}

std::string randomBytes(size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (auto& b : bytes) b = static_cast<char>(rng());
  return bytes;
}

TEST_F(AgentClientTest, FiftyParallelConnectionsEchoByteExact) {
  LoopbackServer server(io_, echo);
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    EXPECT_TRUE(client->helloAck()->hasCapability("tcp"));
    constexpr int kConnections = 50;
    int finished = 0;
    int exact = 0;
    auto executor = co_await asio::this_coro::executor;
    for (int i = 0; i < kConnections; ++i) {
      asio::co_spawn(
          executor,
          [&, i]() -> asio::awaitable<void> {
            const std::string data = randomBytes(100000 + 997 * i, i);
            auto stream = co_await client->connect(server.port());
            if (!stream) {
              ADD_FAILURE() << stream.error().describe();
              ++finished;
              co_return;
            }
            auto tcp_stream = *stream;
            // Writer and reader at once: the echo comes back while we send.
            asio::co_spawn(
                executor,
                [tcp_stream, &data]() -> asio::awaitable<void> {
                  auto written = co_await tcp_stream->write(data);
                  EXPECT_TRUE(written) << written.error().describe();
                  EXPECT_TRUE(tcp_stream->shutdownWrite());
                },
                asio::detached);
            auto echoed = co_await readAll(*tcp_stream);
            EXPECT_TRUE(echoed) << echoed.error().describe();
            if (echoed && *echoed == data) ++exact;
            auto done = co_await tcp_stream->done();
            EXPECT_TRUE(done) << done.error().describe();
            ++finished;
          },
          asio::detached);
    }
    while (finished < kConnections) co_await sleepFor(10ms);
    EXPECT_EQ(exact, kConnections);
    EXPECT_EQ(server.accepted(), kConnections);
    EXPECT_TRUE(co_await client->ping(30s));
  });
}

TEST_F(AgentClientTest, ALargeTransferIsBackPressuredAndByteExact) {
  constexpr size_t kTotal = size_t{32} << 20;
  constexpr size_t kChunk = 64 * 1024;
  size_t served = 0;
  // The server sends kTotal bytes of a pattern as fast as it is allowed to.
  LoopbackServer server(io_, [&](tcp::socket socket) -> asio::awaitable<void> {
    std::string chunk(kChunk, '\0');
    while (served < kTotal) {
      for (size_t i = 0; i < kChunk; ++i) chunk[i] = static_cast<char>((served + i) * 7 % 251);
      boost::system::error_code ec;
      co_await asio::async_write(socket, asio::buffer(chunk),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      served += kChunk;
    }
    socket.shutdown(tcp::socket::shutdown_send);
  });
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto stream = co_await client->connect(server.port(), "localhost");
    CO_ASSERT_TRUE(stream) << stream.error().describe();
    // Not reading: the sender stalls once the window and the socket buffers are full.
    co_await sleepFor(1000ms);
    const size_t stalled = served;
    co_await sleepFor(500ms);
    EXPECT_EQ(served, stalled);
    EXPECT_LT(served, kTotal / 2);
    size_t received = 0;
    bool exact = true;
    while (true) {
      auto bytes = co_await (*stream)->read();
      CO_ASSERT_TRUE(bytes) << bytes.error().describe();
      if (bytes->empty()) break;
      for (size_t i = 0; i < bytes->size() && exact; ++i) {
        exact = (*bytes)[i] == static_cast<char>((received + i) * 7 % 251);
      }
      received += bytes->size();
    }
    EXPECT_EQ(received, kTotal);
    EXPECT_TRUE(exact);
    (*stream)->shutdownWrite();
    EXPECT_TRUE(co_await (*stream)->done());
  });
}

TEST_F(AgentClientTest, UploadsAreBackPressuredToo) {
  constexpr size_t kTotal = size_t{16} << 20;
  size_t consumed = 0;
  uint64_t sum = 0;
  bool start_reading = false;
  LoopbackServer server(io_, [&](tcp::socket socket) -> asio::awaitable<void> {
    while (!start_reading) co_await sleepFor(10ms);
    std::vector<char> buffer(64 * 1024);
    while (true) {
      boost::system::error_code ec;
      const size_t n = co_await socket.async_read_some(
          asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      for (size_t i = 0; i < n; ++i) sum += static_cast<unsigned char>(buffer[i]);
      consumed += n;
    }
    socket.shutdown(tcp::socket::shutdown_send);
  });
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto stream = co_await client->connect(server.port());
    CO_ASSERT_TRUE(stream) << stream.error().describe();
    const std::string data = randomBytes(kTotal, 42);
    uint64_t expected_sum = 0;
    for (char c : data) expected_sum += static_cast<unsigned char>(c);
    bool written = false;
    auto tcp_stream = *stream;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&, tcp_stream]() -> asio::awaitable<void> {
          auto result = co_await tcp_stream->write(data);
          EXPECT_TRUE(result) << result.error().describe();
          written = true;
          tcp_stream->shutdownWrite();
        },
        asio::detached);
    co_await sleepFor(1000ms);
    EXPECT_FALSE(written);  // waiting for window: the server does not read yet
    start_reading = true;
    auto rest = co_await readAll(*tcp_stream);
    CO_ASSERT_TRUE(rest) << rest.error().describe();
    EXPECT_EQ(*rest, "");
    EXPECT_TRUE(written);
    EXPECT_EQ(consumed, kTotal);
    EXPECT_EQ(sum, expected_sum);
    EXPECT_TRUE(co_await tcp_stream->done());
  });
}

TEST_F(AgentClientTest, HalfCloseInBothOrders) {
  // The server reads until end of file, then answers and closes.
  LoopbackServer server(io_, [](tcp::socket socket) -> asio::awaitable<void> {
    std::string got;
    std::vector<char> buffer(1024);
    while (true) {
      boost::system::error_code ec;
      const size_t n = co_await socket.async_read_some(
          asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      got.append(buffer.data(), n);
    }
    const std::string answer = "got " + got;
    co_await asio::async_write(socket, asio::buffer(answer), asio::use_awaitable);
    socket.shutdown(tcp::socket::shutdown_send);
  });
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto stream = co_await client->connect(server.port());
    CO_ASSERT_TRUE(stream) << stream.error().describe();
    EXPECT_TRUE(co_await (*stream)->write("hello"));
    EXPECT_TRUE((*stream)->shutdownWrite());
    const std::string_view more = "more";
    auto refused = co_await (*stream)->write(more);
    EXPECT_EQ(refused.error().code(), Errc::kFailedPrecondition);
    auto answer = co_await readAll(**stream);
    CO_ASSERT_TRUE(answer) << answer.error().describe();
    EXPECT_EQ(*answer, "got hello");
    EXPECT_TRUE(co_await (*stream)->done());
    auto again = co_await (*stream)->read();  // end of file again
    CO_ASSERT_TRUE(again);
    EXPECT_EQ(*again, "");
  });
}

TEST_F(AgentClientTest, PeerClosingFirstStillTakesOurData) {
  // The server sends a greeting and shuts its side down at once, then reads what comes.
  std::string received;
  bool server_done = false;
  LoopbackServer server(io_, [&](tcp::socket socket) -> asio::awaitable<void> {
    co_await asio::async_write(socket, asio::buffer(std::string_view("welcome")),
                               asio::use_awaitable);
    socket.shutdown(tcp::socket::shutdown_send);
    std::vector<char> buffer(1024);
    while (true) {
      boost::system::error_code ec;
      const size_t n = co_await socket.async_read_some(
          asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      received.append(buffer.data(), n);
    }
    server_done = true;
  });
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto stream = co_await client->connect(server.port());
    CO_ASSERT_TRUE(stream);
    auto greeting = co_await readAll(**stream);
    CO_ASSERT_TRUE(greeting);
    EXPECT_EQ(*greeting, "welcome");
    EXPECT_FALSE((*stream)->ended());  // our direction is still open
    EXPECT_TRUE(co_await (*stream)->write("late data"));
    (*stream)->shutdownWrite();
    EXPECT_TRUE(co_await (*stream)->done());
    while (!server_done) co_await sleepFor(10ms);
    EXPECT_EQ(received, "late data");
  });
}

TEST_F(AgentClientTest, RefusedPortsAndBadAddressesAreErrors) {
  uint16_t closed_port = 0;
  {
    tcp::acceptor probe(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    closed_port = probe.local_endpoint().port();
  }
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto refused = co_await client->connect(closed_port);
    CO_ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), Errc::kUnavailable);
    EXPECT_NE(refused.error().message().find("refused"), std::string::npos)
        << refused.error().message();
    EXPECT_NE(refused.error().message().find(std::to_string(closed_port)), std::string::npos);
    auto zero = co_await client->connect(0);
    EXPECT_EQ(zero.error().code(), Errc::kInvalidArgument);
    auto named = co_await client->connect(80, "example.com");
    EXPECT_EQ(named.error().code(), Errc::kInvalidArgument);
    EXPECT_TRUE(co_await client->ping(30s));
  });
}

TEST_F(AgentClientTest, ResetsAndAbortsEndTheStream) {
  bool server_saw_reset = false;
  bool server_done = false;
  int connection = 0;
  // First connection: the server resets it. Second: it waits for what the client does.
  LoopbackServer server(io_, [&](tcp::socket socket) -> asio::awaitable<void> {
    if (connection++ == 0) {
      socket.set_option(asio::socket_base::linger(true, 0));
      socket.close();
      co_return;
    }
    std::vector<char> buffer(1024);
    boost::system::error_code ec;
    while (!ec) {
      co_await socket.async_read_some(asio::buffer(buffer),
                                      asio::redirect_error(asio::use_awaitable, ec));
    }
    server_saw_reset = ec == asio::error::connection_reset;
    server_done = true;
  });
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    // The reset may come before the agent saw the connection complete: then connecting fails.
    auto reset = co_await client->connect(server.port());
    if (reset) {
      auto read = co_await (*reset)->read();
      CO_ASSERT_FALSE(read);
      EXPECT_EQ(read.error().code(), Errc::kUnavailable) << read.error().describe();
      EXPECT_FALSE(co_await (*reset)->done());
    } else {
      EXPECT_EQ(reset.error().code(), Errc::kUnavailable) << reset.error().describe();
      EXPECT_NE(reset.error().message().find("reset"), std::string::npos)
          << reset.error().describe();
    }

    auto aborted = co_await client->connect(server.port());
    CO_ASSERT_TRUE(aborted);
    EXPECT_TRUE(co_await (*aborted)->write("partial"));
    (*aborted)->close();
    auto after = co_await (*aborted)->read();
    EXPECT_EQ(after.error().code(), Errc::kCancelled);
    while (!server_done) co_await sleepFor(10ms);
    EXPECT_TRUE(server_saw_reset);
    EXPECT_TRUE(co_await client->ping(30s));
  });
}

TEST_F(AgentClientTest, LosingTheAgentEndsOpenConnections) {
  LoopbackServer server(io_, echo);
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto stream = co_await client->connect(server.port());
    CO_ASSERT_TRUE(stream);
    agent_->kill();
    auto read = co_await (*stream)->read();
    CO_ASSERT_FALSE(read);
    EXPECT_EQ(read.error().code(), Errc::kUnavailable);
  });
}

// A suspend in the middle of a transfer both ways: the stream is parked while data flows, its
// client goes away (QEMU exits), a new client resumes it, and the echo is byte-exact.
TEST_F(AgentClientTest, AParkedConnectionGoesOnThroughANewClientWithNothingLost) {
  LoopbackServer server(io_, echo);
  run([&]() -> asio::awaitable<void> {
    auto first = co_await connect();
    CO_ASSERT_TRUE(first);
    EXPECT_TRUE(first->helloAck()->hasCapability("park"));
    auto connected = co_await first->connect(server.port());
    CO_ASSERT_TRUE(connected) << connected.error().describe();
    std::shared_ptr<TcpStream> stream = *connected;
    const std::string data = randomBytes(size_t{8} << 20, 7);
    bool written = false;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [stream, &data, &written]() -> asio::awaitable<void> {
          auto result = co_await stream->write(data);
          EXPECT_TRUE(result) << result.error().describe();
          EXPECT_TRUE(stream->shutdownWrite());
          written = true;
        },
        asio::detached);
    std::string echoed;
    while (echoed.size() < (size_t{1} << 20)) {
      auto bytes = co_await stream->read();
      CO_ASSERT_TRUE(bytes) << bytes.error().describe();
      echoed += *bytes;
    }
    auto parked = co_await first->parkTcpStreams(30s);
    CO_ASSERT_TRUE(parked) << parked.error().describe();
    CO_ASSERT_EQ(parked->size(), 1u);
    EXPECT_EQ(parked->front(), stream);
    EXPECT_TRUE(stream->parked());
    first->close();  // the box's QEMU exits: the stream waits
    co_await sleepFor(300ms);
    EXPECT_FALSE(stream->ended());
    EXPECT_FALSE(written);

    auto second = co_await connect();
    CO_ASSERT_TRUE(second);
    auto resumed = co_await second->resumeTcpStream(stream, 30s);
    CO_ASSERT_TRUE(resumed) << resumed.error().describe();
    EXPECT_FALSE(stream->parked());
    auto rest = co_await readAll(*stream);
    CO_ASSERT_TRUE(rest) << rest.error().describe();
    echoed += *rest;
    EXPECT_TRUE(written);
    EXPECT_EQ(echoed.size(), data.size());
    EXPECT_TRUE(echoed == data);
    EXPECT_TRUE(co_await stream->done());
    // Once resumed it is gone from the agent's parked ones.
    auto again = co_await second->parkTcpStreams(30s);
    CO_ASSERT_TRUE(again);
    EXPECT_TRUE(again->empty());
  });
}

// A parked stream whose agent lost it (the box booted cold): resuming fails with kNotFound and
// ends the stream; closing a parked stream ends it here at once.
TEST_F(AgentClientTest, AParkedConnectionTheAgentLostEndsWhenResumed) {
  LoopbackServer server(io_, echo);
  run([&]() -> asio::awaitable<void> {
    auto first = co_await connect();
    CO_ASSERT_TRUE(first);
    auto a = co_await first->connect(server.port());
    auto b = co_await first->connect(server.port());
    CO_ASSERT_TRUE(a && b);
    auto parked = co_await first->parkTcpStreams(30s);
    CO_ASSERT_TRUE(parked) << parked.error().describe();
    EXPECT_EQ(parked->size(), 2u);
    first->close();
    agent_->kill();  // a cold boot: a new agent, which parked nothing
    agent_ = std::move(*AgentProcess::start());
    auto second = co_await connect();
    CO_ASSERT_TRUE(second);
    auto resumed = co_await second->resumeTcpStream(*a, 30s);
    CO_ASSERT_FALSE(resumed);
    EXPECT_EQ(resumed.error().code(), Errc::kNotFound) << resumed.error().describe();
    EXPECT_TRUE((*a)->ended());
    auto read = co_await (*a)->read();
    EXPECT_FALSE(read);
    (*b)->close();
    EXPECT_TRUE((*b)->ended());
    auto refused = co_await second->resumeTcpStream(*b, 30s);
    EXPECT_EQ(refused.error().code(), Errc::kFailedPrecondition);
    EXPECT_TRUE(co_await second->ping(30s));
  });
}

}  // namespace
}  // namespace hutch::guest

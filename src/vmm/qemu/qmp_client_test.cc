#include "vmm/qemu/qmp_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <functional>

namespace hutch::vmm::qemu {
namespace {

using namespace std::chrono_literals;
using boost::system::error_code;
using Socket = asio::local::stream_protocol::socket;

Json greeting() {
  return {{"QMP",
           {{"version", {{"qemu", {{"micro", 22}, {"minor", 2}, {"major", 7}}}, {"package", ""}}},
            {"capabilities", {"oob"}}}}};
}
Json answer(const Json& request, Json value) {
  return {{"return", std::move(value)}, {"id", request["id"]}};
}
Json event(std::string name, Json data = Json::object()) {
  return {{"event", std::move(name)},
          {"data", std::move(data)},
          {"timestamp", {{"seconds", 1}, {"microseconds", 2}}}};
}

struct Reply {
  std::vector<Json> messages;
  bool close_after = false;
};

// A scripted QMP server on one end of a socket: sends the greeting, answers qmp_capabilities,
// and hands every other request to `handler`.
class FakeQmp {
 public:
  using Handler = std::function<Reply(const Json& request)>;
  FakeQmp(Socket socket, Handler handler, std::string greeting_line = greeting().dump())
      : socket_(std::move(socket)), handler_(std::move(handler)), greeting_(greeting_line) {}

  asio::awaitable<void> serve() {
    error_code ec;
    if (!greeting_.empty()) co_await send(greeting_);
    std::string buffer;
    for (;;) {
      size_t n = co_await asio::async_read_until(socket_, asio::dynamic_buffer(buffer), '\n',
                                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      Json request = Json::parse(buffer.substr(0, n));
      buffer.erase(0, n);
      requests.push_back(request);
      Reply reply = request["execute"] == "qmp_capabilities"
                        ? Reply{{answer(request, Json::object())}}
                        : handler_(request);
      for (const Json& message : reply.messages) co_await send(message.dump());
      if (reply.close_after) {
        socket_.close(ec);
        co_return;
      }
    }
  }

  std::vector<Json> requests;

 private:
  asio::awaitable<void> send(std::string line) {
    line += "\r\n";
    error_code ec;
    co_await asio::async_write(socket_, asio::buffer(line),
                               asio::redirect_error(asio::use_awaitable, ec));
  }

  Socket socket_;
  Handler handler_;
  std::string greeting_;
};

class QmpClientTest : public ::testing::Test {
 protected:
  // Runs `body` against a fake server with `handler`, on one io_context, to completion.
  void run(FakeQmp::Handler handler,
           std::function<asio::awaitable<void>(std::shared_ptr<QmpClient>)> body,
           std::string greeting_line = greeting().dump()) {
    Socket client(ctx_), server(ctx_);
    asio::local::connect_pair(client, server);
    fake_ = std::make_unique<FakeQmp>(std::move(server), std::move(handler), greeting_line);
    asio::co_spawn(ctx_, fake_->serve(), asio::detached);
    bool done = false;
    asio::co_spawn(
        ctx_,
        [&]() -> asio::awaitable<void> {
          auto qmp = co_await QmpClient::handshake(std::move(client), 500ms);
          handshake_ = qmp ? Result<>() : fail(qmp.error());
          if (qmp) co_await body(*qmp);
          if (qmp) (*qmp)->close();
          done = true;
          ctx_.stop();
        },
        asio::detached);
    ctx_.run_for(10s);
    EXPECT_TRUE(done) << "the test body did not finish";
  }

  asio::io_context ctx_;
  std::unique_ptr<FakeQmp> fake_;
  Result<> handshake_;
};

TEST_F(QmpClientTest, ExecutesCommandsAndReturnsTheirValue) {
  run(
      [](const Json& r) {
        return Reply{{answer(r, {{"status", "running"}, {"running", true}})}};
      },
      [&](std::shared_ptr<QmpClient> qmp) -> asio::awaitable<void> {
        EXPECT_EQ(qmp->qemuVersion(), "7.2.22");
        auto status = co_await qmp->execute("query-status");
        EXPECT_TRUE(status) << status.error().message();
        if (status) {
          EXPECT_EQ((*status)["status"], "running");
        }
        // (A braced Json inside co_await trips GCC 12: build the arguments first.)
        Json args = {{"uri", "exec:cat > /x"}};
        auto with_args = co_await qmp->execute("migrate", args);
        EXPECT_TRUE(with_args);
      });
  ASSERT_TRUE(handshake_) << handshake_.error().message();
  ASSERT_EQ(fake_->requests.size(), 3u);
  EXPECT_EQ(fake_->requests[0]["execute"], "qmp_capabilities");
  EXPECT_FALSE(fake_->requests[1].contains("arguments"));
  EXPECT_EQ(fake_->requests[2]["arguments"]["uri"], "exec:cat > /x");
  EXPECT_NE(fake_->requests[1]["id"], fake_->requests[2]["id"]);
}

TEST_F(QmpClientTest, MapsQmpErrors) {
  run(
      [](const Json& r) {
        std::string cls = r["execute"] == "nope" ? "CommandNotFound" : "GenericError";
        return Reply{{{{"error", {{"class", cls}, {"desc", "it went wrong"}}}, {"id", r["id"]}}}};
      },
      [&](std::shared_ptr<QmpClient> qmp) -> asio::awaitable<void> {
        auto missing = co_await qmp->execute("nope");
        EXPECT_FALSE(missing);
        if (!missing) {
          EXPECT_EQ(missing.error().code(), Errc::kUnsupported);
          EXPECT_EQ(missing.error().message(), "QEMU refused 'nope': it went wrong");
        }
        auto generic = co_await qmp->execute("cont");
        EXPECT_FALSE(generic);
        if (!generic) {
          EXPECT_EQ(generic.error().code(), Errc::kFailedPrecondition);
        }
        EXPECT_TRUE(qmp->connected());  // an error answer is not a broken connection
      });
}

TEST_F(QmpClientTest, MatchesAnswersOutOfOrder) {
  Json held;
  run(
      [&](const Json& r) {
        if (r["execute"] == "first") {
          held = r;
          return Reply{};
        }
        // Answers "second", then the held "first".
        return Reply{{answer(r, "second"), answer(held, "first")}};
      },
      [&](std::shared_ptr<QmpClient> qmp) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        std::optional<Result<Json>> first;
        asio::co_spawn(
            ex, [&]() -> asio::awaitable<void> { first = co_await qmp->execute("first"); },
            asio::detached);
        // Let "first" reach the server before "second" is sent.
        asio::steady_timer timer(ex);
        for (int i = 0; i < 100 && held.is_null(); ++i) {
          timer.expires_after(5ms);
          co_await timer.async_wait(asio::use_awaitable);
        }
        EXPECT_FALSE(held.is_null());
        auto second = co_await qmp->execute("second");
        EXPECT_TRUE(second && *second == "second");
        for (int i = 0; i < 100 && !first; ++i) {
          timer.expires_after(5ms);
          co_await timer.async_wait(asio::use_awaitable);
        }
        EXPECT_TRUE(first && *first && **first == "first");
      });
}

TEST_F(QmpClientTest, CollectsAndDispatchesEvents) {
  std::vector<std::string> seen;
  run(
      [](const Json& r) {
        if (r["execute"] == "stop") return Reply{{event("STOP"), answer(r, Json::object())}};
        return Reply{{answer(r, Json::object()), event("RESUME", {{"reason", "x"}})}};
      },
      [&](std::shared_ptr<QmpClient> qmp) -> asio::awaitable<void> {
        qmp->setEventHandler([&](const QmpEvent& e) { seen.push_back(e.name); });
        uint64_t before = qmp->lastEventSeq();
        EXPECT_TRUE(co_await qmp->execute("stop"));
        auto stop = co_await qmp->waitEvent("STOP", before, 1s);
        EXPECT_TRUE(stop);
        uint64_t after_stop = qmp->lastEventSeq();
        EXPECT_TRUE(co_await qmp->execute("cont"));
        auto resume = co_await qmp->waitEvent("RESUME", after_stop, 1s);
        EXPECT_TRUE(resume);
        if (resume) {
          EXPECT_EQ(resume->data["reason"], "x");
          EXPECT_EQ(resume->seq, 2u);
        }
        auto never = co_await qmp->waitEvent("SHUTDOWN", 0, 50ms);
        EXPECT_FALSE(never);
        if (!never) {
          EXPECT_EQ(never.error().code(), Errc::kTimeout);
        }
        EXPECT_EQ(qmp->events().size(), 2u);
      });
  EXPECT_EQ(seen, (std::vector<std::string>{"STOP", "RESUME"}));
}

TEST_F(QmpClientTest, ConnectionLossFailsPendingAndLaterCommands) {
  run(
      [](const Json&) {
        return Reply{{}, true};
      },
      [&](std::shared_ptr<QmpClient> qmp) -> asio::awaitable<void> {
        auto pending = co_await qmp->execute("quit");
        EXPECT_FALSE(pending);
        if (!pending) {
          EXPECT_EQ(pending.error().code(), Errc::kUnavailable);
          EXPECT_NE(pending.error().message().find("QEMU closed the QMP connection"),
                    std::string::npos)
              << pending.error().message();
        }
        EXPECT_FALSE(qmp->connected());
        auto later = co_await qmp->execute("query-status");
        EXPECT_FALSE(later);
        if (!later) {
          EXPECT_EQ(later.error().code(), Errc::kUnavailable);
        }
        auto event = co_await qmp->waitEvent("STOP", 0, 1s);
        EXPECT_FALSE(event);
        if (!event) {
          EXPECT_EQ(event.error().code(), Errc::kUnavailable);
        }
      });
}

TEST_F(QmpClientTest, SilentPeerTimesOut) {
  run([](const Json&) { return Reply{}; },
      [&](std::shared_ptr<QmpClient> qmp) -> asio::awaitable<void> {
        auto start = std::chrono::steady_clock::now();
        auto r = co_await qmp->execute("query-status", nullptr, 100ms);
        EXPECT_FALSE(r);
        if (!r) {
          EXPECT_EQ(r.error().code(), Errc::kTimeout);
        }
        EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
        EXPECT_TRUE(qmp->connected());
      });
}

TEST_F(QmpClientTest, RejectsABadGreeting) {
  run([](const Json&) { return Reply{}; },
      [](std::shared_ptr<QmpClient>) -> asio::awaitable<void> { co_return; }, R"({"hello": 1})");
  ASSERT_FALSE(handshake_);
  EXPECT_EQ(handshake_.error().code(), Errc::kProtocol);
}

TEST_F(QmpClientTest, NoGreetingTimesOut) {
  run([](const Json&) { return Reply{}; },
      [](std::shared_ptr<QmpClient>) -> asio::awaitable<void> { co_return; }, "");
  ASSERT_FALSE(handshake_);
  EXPECT_EQ(handshake_.error().code(), Errc::kTimeout);
}

TEST(QmpConnectTest, ConnectsToAUnixSocketPath) {
  char tmpl[] = "/tmp/hutch-qmp-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::filesystem::path dir = tmpl;
  asio::io_context ctx;
  asio::local::stream_protocol::acceptor acceptor(
      ctx, asio::local::stream_protocol::endpoint((dir / "qmp.sock").string()));
  std::unique_ptr<FakeQmp> fake;
  acceptor.async_accept([&](error_code ec, Socket socket) {
    ASSERT_FALSE(ec);
    fake = std::make_unique<FakeQmp>(std::move(socket), [](const Json& r) {
      return Reply{{answer(r, {{"status", "paused"}})}};
    });
    asio::co_spawn(ctx, fake->serve(), asio::detached);
  });
  bool done = false;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto missing = co_await QmpClient::connect(dir / "missing.sock", 1s);
        EXPECT_FALSE(missing);
        if (!missing) {
          EXPECT_EQ(missing.error().code(), Errc::kUnavailable);
        }
        auto qmp = co_await QmpClient::connect(dir / "qmp.sock", 1s);
        EXPECT_TRUE(qmp) << (qmp ? "" : qmp.error().describe());
        if (qmp) {
          auto status = co_await (*qmp)->execute("query-status");
          EXPECT_TRUE(status && (*status)["status"] == "paused");
          (*qmp)->close();
        }
        done = true;
        ctx.stop();
      },
      asio::detached);
  ctx.run_for(std::chrono::seconds(10));
  EXPECT_TRUE(done);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hutch::vmm::qemu

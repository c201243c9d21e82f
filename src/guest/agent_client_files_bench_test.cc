// Measurements of the files protocol against the real agent (--listen), printed as JSON lines;
// not assertions, and disabled in normal runs:
//
//   build/src/guest/guest_test --gtest_also_run_disabled_tests
//     --gtest_filter='AgentClientFilesBench.*'
//
// Each compares two ways side by side: the files protocol and what hutch did before it (exec of
// cat / stat), and the agent loop's responsiveness (ping round trips) while file work runs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "guest/agent_client.h"
#include "guest/testing/client_test_support.h"

namespace hutch::guest {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace testing;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Rtts {
  std::vector<double> ms;

  std::string json() const {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    auto at = [&](double q) {
      return sorted.empty() ? 0.0 : sorted[static_cast<size_t>(q * (sorted.size() - 1))];
    };
    char buffer[160];
    std::snprintf(buffer, sizeof buffer,
                  R"({"pings":%zu,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f})", sorted.size(),
                  at(0.5), at(0.99), sorted.empty() ? 0.0 : sorted.back());
    return buffer;
  }
};

// Pings every 2 ms until *stop, recording each round trip.
asio::awaitable<void> pingLoop(std::shared_ptr<AgentClient> client, std::shared_ptr<bool> stop,
                               std::shared_ptr<Rtts> rtts) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!*stop) {
    const auto start = Clock::now();
    auto pong = co_await client->ping(30s);
    if (!pong) co_return;
    rtts->ms.push_back(secondsSince(start) * 1000);
    timer.expires_after(2ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

void print(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

class AgentClientFilesBench : public AgentClientTest {
 protected:
  void SetUp() override {
    AgentClientTest::SetUp();
    dir_ = agent_->dir() + "/bench";
    fs::create_directories(dir_);
  }
  std::string dir_;
};

TEST_F(AgentClientFilesBench, DISABLED_ReadAndWriteThroughput) {
  constexpr size_t kSize = size_t{256} << 20;
  {
    std::ofstream out(dir_ + "/big", std::ios::binary);
    const std::string chunk(1 << 20, 'r');
    for (size_t i = 0; i < kSize / chunk.size(); ++i) out << chunk;
  }
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto executor = co_await asio::this_coro::executor;
    for (int round = 0; round < 3; ++round) {
      // Reading: kFileRead, with pings alongside.
      {
        auto stop = std::make_shared<bool>(false);
        auto rtts = std::make_shared<Rtts>();
        asio::co_spawn(executor, pingLoop(client, stop, rtts), asio::detached);
        const proto::FileReadRequest request{dir_ + "/big", ""};
        const auto start = Clock::now();
        auto reader = co_await client->openRead(request);
        CO_ASSERT_TRUE(reader);
        size_t got = 0;
        while (true) {
          auto chunk = co_await (*reader)->next();
          CO_ASSERT_TRUE(chunk);
          if (!*chunk) break;
          got += (*chunk)->size();
        }
        const double seconds = secondsSince(start);
        *stop = true;
        print(R"({"bench":"read","method":"files","bytes":)" + std::to_string(got) +
              R"(,"seconds":)" + std::to_string(seconds) + R"(,"mb_per_s":)" +
              std::to_string(got / seconds / 1e6) + R"(,"loop":)" + rtts->json() + "}");
      }
      // Reading: exec cat, as hutch cp does (tar) today.
      {
        const proto::ExecRequest cat = command({"cat", dir_ + "/big"});
        const auto start = Clock::now();
        auto session = co_await client->exec(cat);
        CO_ASSERT_TRUE(session);
        size_t got = 0;
        while (true) {
          auto event = co_await (*session)->next();
          CO_ASSERT_TRUE(event);
          if (event->kind == ExecEvent::Kind::kExit) break;
          got += event->data.size();
        }
        const double seconds = secondsSince(start);
        print(R"({"bench":"read","method":"exec cat","bytes":)" + std::to_string(got) +
              R"(,"seconds":)" + std::to_string(seconds) + R"(,"mb_per_s":)" +
              std::to_string(got / seconds / 1e6) + "}");
      }
      // Writing: kFileWrite (the worker writes, fsyncs, renames), with pings alongside.
      {
        auto stop = std::make_shared<bool>(false);
        auto rtts = std::make_shared<Rtts>();
        asio::co_spawn(executor, pingLoop(client, stop, rtts), asio::detached);
        const std::string chunk(1 << 20, 'w');
        const proto::FileWriteRequest request{dir_ + "/written", "", {}, "", "", true};
        const auto start = Clock::now();
        auto writer = co_await client->openWrite(request);
        CO_ASSERT_TRUE(writer);
        for (size_t i = 0; i < kSize / chunk.size(); ++i) {
          CO_ASSERT_TRUE(co_await (*writer)->write(chunk));
        }
        auto info = co_await (*writer)->finish();
        CO_ASSERT_TRUE(info);
        const double seconds = secondsSince(start);
        *stop = true;
        print(R"({"bench":"write","method":"files, with fsync","bytes":)" + std::to_string(kSize) +
              R"(,"seconds":)" + std::to_string(seconds) + R"(,"mb_per_s":)" +
              std::to_string(kSize / seconds / 1e6) + R"(,"loop":)" + rtts->json() + "}");
      }
      // Writing: exec of a shell that cats stdin into the file (no fsync).
      {
        proto::ExecRequest sh = command({"sh", "-c", "cat > " + dir_ + "/written2"}, true);
        const std::string chunk(1 << 20, 'w');
        const auto start = Clock::now();
        auto session = co_await client->exec(sh);
        CO_ASSERT_TRUE(session);
        for (size_t i = 0; i < kSize / chunk.size(); ++i) {
          CO_ASSERT_TRUE(co_await (*session)->writeStdin(chunk));
        }
        CO_ASSERT_TRUE((*session)->closeStdin());
        auto done = co_await collect(*session);
        CO_ASSERT_TRUE(done.exit.has_value());
        const double seconds = secondsSince(start);
        print(R"({"bench":"write","method":"exec sh -c cat>f","bytes":)" + std::to_string(kSize) +
              R"(,"seconds":)" + std::to_string(seconds) + R"(,"mb_per_s":)" +
              std::to_string(kSize / seconds / 1e6) + "}");
      }
    }
  });
}

TEST_F(AgentClientFilesBench, DISABLED_SmallOperationsAgainstExec) {
  { std::ofstream(dir_ + "/small") << "small"; }
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    constexpr int kCount = 300;
    const proto::FileStatRequest stat{dir_ + "/small", "", false};
    auto start = Clock::now();
    for (int i = 0; i < kCount; ++i) CO_ASSERT_TRUE(co_await client->stat(stat));
    print(R"({"bench":"stat","method":"files","per_op_ms":)" +
          std::to_string(secondsSince(start) * 1000 / kCount) + "}");
    const proto::ExecRequest exec_stat = command({"stat", "-c", "%s %a %U", dir_ + "/small"});
    start = Clock::now();
    for (int i = 0; i < kCount; ++i) {
      auto ran = co_await runCommand(*client, exec_stat);
      CO_ASSERT_TRUE(ran.exit.has_value());
    }
    print(R"({"bench":"stat","method":"exec stat","per_op_ms":)" +
          std::to_string(secondsSince(start) * 1000 / kCount) + "}");
    const proto::FileReadRequest read{dir_ + "/small", ""};
    start = Clock::now();
    for (int i = 0; i < kCount; ++i) {
      auto reader = co_await client->openRead(read);
      CO_ASSERT_TRUE(reader);
      while (true) {
        auto chunk = co_await (*reader)->next();
        CO_ASSERT_TRUE(chunk);
        if (!*chunk) break;
      }
    }
    print(R"({"bench":"read small file","method":"files","per_op_ms":)" +
          std::to_string(secondsSince(start) * 1000 / kCount) + "}");
    const proto::ExecRequest cat = command({"cat", dir_ + "/small"});
    start = Clock::now();
    for (int i = 0; i < kCount; ++i) {
      auto ran = co_await runCommand(*client, cat);
      CO_ASSERT_TRUE(ran.exit.has_value());
    }
    print(R"({"bench":"read small file","method":"exec cat","per_op_ms":)" +
          std::to_string(secondsSince(start) * 1000 / kCount) + "}");
  });
}

TEST_F(AgentClientFilesBench, DISABLED_TheLoopStaysFreeDuringATreeWalk) {
  // 20 000 files in 200 directories: a recursive list and remove run on the workers.
  for (int d = 0; d < 200; ++d) {
    const std::string sub = dir_ + "/tree/" + std::to_string(d);
    fs::create_directories(sub);
    for (int f = 0; f < 100; ++f) {
      ::close(
          ::open((sub + "/" + std::to_string(f)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    }
  }
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto executor = co_await asio::this_coro::executor;
    {
      auto stop = std::make_shared<bool>(false);
      auto rtts = std::make_shared<Rtts>();
      asio::co_spawn(executor, pingLoop(client, stop, rtts), asio::detached);
      const proto::FileStatRequest stat{dir_, "", false};
      for (int i = 0; i < 200; ++i) CO_ASSERT_TRUE(co_await client->stat(stat));
      *stop = true;
      print(R"({"bench":"loop","while":"idle, stats only","loop":)" + rtts->json() + "}");
    }
    for (const char* what : {"list", "remove"}) {
      auto stop = std::make_shared<bool>(false);
      auto rtts = std::make_shared<Rtts>();
      asio::co_spawn(executor, pingLoop(client, stop, rtts), asio::detached);
      const auto start = Clock::now();
      if (std::string(what) == "list") {
        const proto::FileListRequest list{dir_ + "/tree", "", 32, 100000};
        auto listed = co_await client->listDir(list);
        CO_ASSERT_TRUE(listed);
        CO_ASSERT_EQ(listed->entries.size(), 20200u);
      } else {
        const proto::FileRemoveRequest remove{dir_ + "/tree", "", true};
        CO_ASSERT_TRUE(co_await client->remove(remove));
      }
      const double seconds = secondsSince(start);
      *stop = true;
      print(std::string(R"({"bench":"loop","while":"recursive )") + what +
            R"( of 20200 entries","seconds":)" + std::to_string(seconds) + R"(,"loop":)" +
            rtts->json() + "}");
    }
  });
}

}  // namespace
}  // namespace hutch::guest

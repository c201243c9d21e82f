// Test support for the files protocol's AgentClient tests (agent_client_files_test.cc,
// agent_client_file_streams_test.cc): files made by hand, whole reads and writes, temporary
// files left by the agent, waiting for watch events, and a fixture with a directory to work in.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "guest/agent_client.h"
#include "guest/testing/client_test_support.h"
#include "proto/files.h"

namespace hutch::guest::testing {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using proto::FileEventType;

inline std::string randomBytes(size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (auto& b : bytes) b = static_cast<char>(rng());
  return bytes;
}

inline void writeFile(const std::string& path, const std::string& content, mode_t mode = 0644) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  }
  ::chmod(path.c_str(), mode);
}

inline asio::awaitable<Result<std::string>> readAll(FileReader& reader) {
  std::string all;
  while (true) {
    auto chunk = co_await reader.next();
    if (!chunk) co_return fail(chunk.error());
    if (!*chunk) co_return all;
    all += **chunk;
  }
}

inline asio::awaitable<Result<proto::FileInfo>> writeAll(AgentClient& client,
                                                         proto::FileWriteRequest request,
                                                         const std::string& content) {
  auto writer = co_await client.openWrite(std::move(request));
  if (!writer) co_return fail(writer.error());
  // Odd chunk sizes, so frames and windows do not line up.
  for (size_t offset = 0; offset < content.size(); offset += 100003) {
    auto written = co_await (*writer)->write(std::string_view(content).substr(offset, 100003));
    if (!written) co_return fail(written.error());
  }
  co_return co_await (*writer)->finish();
}

inline asio::awaitable<void> sleepFor(std::chrono::milliseconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(asio::use_awaitable);
}

// The temporary files the agent left in dir (".NAME.hutch-RANDOM").
inline std::vector<std::string> tempFiles(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename();
    if (name.find(".hutch-") != std::string::npos) found.push_back(name);
  }
  return found;
}

// Waits (letting the loops run) until dir holds no temporary file; false after 10 s.
inline asio::awaitable<bool> noTempFilesSoon(const std::string& dir) {
  for (int i = 0; i < 1000; ++i) {
    if (tempFiles(dir).empty()) co_return true;
    co_await sleepFor(10ms);
  }
  co_return false;
}

// Events from watch until one matches want (or 20 s pass: then the watch is closed).
inline asio::awaitable<std::vector<proto::FileEvent>> eventsUntil(std::shared_ptr<FileWatch> watch,
                                                                  FileEventType type,
                                                                  std::string path) {
  std::vector<proto::FileEvent> seen;
  auto guard = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor, 20s);
  guard->async_wait([watch](boost::system::error_code ec) {
    if (!ec) watch->close();
  });
  while (true) {
    auto batch = co_await watch->next();
    if (!batch || !*batch) break;
    bool found = false;
    for (auto& event : (*batch)->events) {
      found = found || (event.type == type && event.path == path);
      seen.push_back(std::move(event));
    }
    if (found) break;
  }
  guard->cancel();
  co_return seen;
}

inline bool contains(const std::vector<proto::FileEvent>& events, FileEventType type,
                     const std::string& path) {
  for (const auto& e : events) {
    if (e.type == type && e.path == path) return true;
  }
  return false;
}

inline std::string describe(const std::vector<proto::FileEvent>& events) {
  std::string text;
  for (const auto& e : events) {
    text += std::string(proto::fileEventTypeName(e.type)) + " " + e.path + "\n";
  }
  return text;
}

class AgentClientFilesTest : public AgentClientTest {
 protected:
  void SetUp() override {
    AgentClientTest::SetUp();
    root_ = agent_->dir() + "/files";
    fs::create_directories(root_);
  }

  // A directory another user may enter (the agent's temp dir is 0700).
  std::string sharedDir(const std::string& name) {
    ::chmod(agent_->dir().c_str(), 0755);
    ::chmod(root_.c_str(), 0755);
    const std::string dir = root_ + "/" + name;
    fs::create_directories(dir);
    ::chmod(dir.c_str(), 0777);
    return dir;
  }

  std::string root_;
};

}  // namespace hutch::guest::testing

// Files without exec through AgentClient and the real agent (--listen): the agent works on
// files in the test's temp directory. What needs root (other users, owners) skips without it.
// The hostile-agent cases use a scripted fake agent.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "guest/agent_client.h"
#include "guest/testing/client_test_support.h"
#include "proto/files.h"
#include "proto/tcp.h"

namespace hutch::guest {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace testing;
using proto::FileEventType;
using proto::FileType;

std::string randomBytes(size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (auto& b : bytes) b = static_cast<char>(rng());
  return bytes;
}

void writeFile(const std::string& path, const std::string& content, mode_t mode = 0644) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  }
  ::chmod(path.c_str(), mode);
}

asio::awaitable<Result<std::string>> readAll(FileReader& reader) {
  std::string all;
  while (true) {
    auto chunk = co_await reader.next();
    if (!chunk) co_return fail(chunk.error());
    if (!*chunk) co_return all;
    all += **chunk;
  }
}

asio::awaitable<Result<proto::FileInfo>> writeAll(AgentClient& client,
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

asio::awaitable<void> sleepFor(std::chrono::milliseconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(asio::use_awaitable);
}

// The temporary files the agent left in dir (".NAME.hutch-RANDOM").
std::vector<std::string> tempFiles(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename();
    if (name.find(".hutch-") != std::string::npos) found.push_back(name);
  }
  return found;
}

// Waits (letting the loops run) until dir holds no temporary file; false after 10 s.
asio::awaitable<bool> noTempFilesSoon(const std::string& dir) {
  for (int i = 0; i < 1000; ++i) {
    if (tempFiles(dir).empty()) co_return true;
    co_await sleepFor(10ms);
  }
  co_return false;
}

// Events from watch until one matches want (or 20 s pass: then the watch is closed).
asio::awaitable<std::vector<proto::FileEvent>> eventsUntil(std::shared_ptr<FileWatch> watch,
                                                           FileEventType type, std::string path) {
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

bool contains(const std::vector<proto::FileEvent>& events, FileEventType type,
              const std::string& path) {
  for (const auto& e : events) {
    if (e.type == type && e.path == path) return true;
  }
  return false;
}

std::string describe(const std::vector<proto::FileEvent>& events) {
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

TEST_F(AgentClientFilesTest, StatDescribesFilesDirectoriesAndSymlinks) {
  writeFile(root_ + "/a.txt", "hello, world\n", 0640);
  fs::create_directory(root_ + "/d");
  ::chmod((root_ + "/d").c_str(), 01755);
  fs::create_symlink("a.txt", root_ + "/link");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    EXPECT_TRUE(client->helloAck()->hasCapability("files"));
    EXPECT_TRUE(client->helloAck()->hasCapability("watch"));
    const proto::FileStatRequest file_request{root_ + "/a.txt", "", false};
    auto file = co_await client->stat(file_request);
    CO_ASSERT_TRUE(file) << file.error().describe();
    EXPECT_EQ(file->name, "a.txt");
    EXPECT_EQ(file->path, root_ + "/a.txt");
    EXPECT_EQ(file->type, FileType::kFile);
    EXPECT_EQ(file->size, 13u);
    EXPECT_EQ(file->mode, 0640u);
    EXPECT_EQ(file->permissions, "-rw-r-----");
    EXPECT_EQ(file->uid, ::geteuid());
    EXPECT_EQ(file->owner, ::getpwuid(::geteuid())->pw_name);
    EXPECT_EQ(file->group, ::getgrgid(::getegid())->gr_name);
    struct stat st {};
    ::stat((root_ + "/a.txt").c_str(), &st);
    EXPECT_EQ(file->mtime_ns, st.st_mtim.tv_sec * 1'000'000'000 + st.st_mtim.tv_nsec);
    EXPECT_EQ(file->symlink_target, "");

    const proto::FileStatRequest dir_request{root_ + "//d/", "", false};
    auto dir = co_await client->stat(dir_request);
    CO_ASSERT_TRUE(dir) << dir.error().describe();
    EXPECT_EQ(dir->path, root_ + "/d");  // clean
    EXPECT_EQ(dir->type, FileType::kDir);
    EXPECT_EQ(dir->permissions, "drwxr-xr-t");
    EXPECT_EQ(dir->mode, 01755u);

    const proto::FileStatRequest link_request{root_ + "/d/../link", "", false};
    auto link = co_await client->stat(link_request);
    CO_ASSERT_TRUE(link) << link.error().describe();
    EXPECT_EQ(link->path, root_ + "/link");
    EXPECT_EQ(link->type, FileType::kSymlink);
    EXPECT_EQ(link->symlink_target, "a.txt");
    EXPECT_EQ(link->permissions, "lrwxrwxrwx");
    const proto::FileStatRequest followed_request{root_ + "/link", "", true};
    auto followed = co_await client->stat(followed_request);
    CO_ASSERT_TRUE(followed);
    EXPECT_EQ(followed->type, FileType::kFile);
    EXPECT_EQ(followed->size, 13u);

    const proto::FileStatRequest missing_request{root_ + "/nope", "", false};
    auto missing = co_await client->stat(missing_request);
    CO_ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    EXPECT_NE(missing.error().message().find(root_ + "/nope"), std::string::npos);
    const proto::FileStatRequest empty_request{"", "", false};
    auto empty = co_await client->stat(empty_request);
    CO_ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().code(), Errc::kInvalidArgument);
    const proto::FileStatRequest no_user_request{root_, "no-such-user-hutch", false};
    auto no_user = co_await client->stat(no_user_request);
    CO_ASSERT_FALSE(no_user);
    EXPECT_EQ(no_user.error().code(), Errc::kNotFound);
  });
}

TEST_F(AgentClientFilesTest, RelativePathsAreFromTheUsersHome) {
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const passwd* me = ::getpwuid(::geteuid());
    CO_ASSERT_TRUE(me != nullptr);
    const std::string home = me->pw_dir;
    const proto::FileStatRequest here_request{".", "", false};
    auto here = co_await client->stat(here_request);
    if (fs::exists(home)) {
      CO_ASSERT_TRUE(here) << here.error().describe();
      EXPECT_EQ(here->path, fs::path(home).lexically_normal().string());
    }
    // A uid without an entry has home "/": the test's directory, relative to it.
    if (::geteuid() == 0) {
      ::chmod(agent_->dir().c_str(), 0755);
      ::chmod(root_.c_str(), 0755);
      const proto::FileStatRequest relative_request{root_.substr(1) + "/../files", "4242", false};
      auto relative = co_await client->stat(relative_request);
      CO_ASSERT_TRUE(relative) << relative.error().describe();
      EXPECT_EQ(relative->path, root_);
    }
  });
}

TEST_F(AgentClientFilesTest, ListIsSortedWithDepthAndTruncation) {
  for (const char* dir : {"b", "b/inner", "b/inner/deep", "a-b", "c"}) {
    fs::create_directories(root_ + "/" + dir);
  }
  for (const char* file : {"z.txt", "b/one", "b/inner/two", "b/inner/deep/three", "a-b/x"}) {
    writeFile(root_ + "/" + file, "x");
  }
  fs::create_symlink(root_ + "/b", root_ + "/c/to-b");  // never descended into
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    auto names = [&](const proto::FileList& list) {
      std::vector<std::string> out;
      for (const auto& e : list.entries) out.push_back(e.path.substr(root_.size() + 1));
      return out;
    };
    const proto::FileListRequest one_request{root_, "", 1, 10000};
    auto one = co_await client->listDir(one_request);
    CO_ASSERT_TRUE(one) << one.error().describe();
    EXPECT_EQ(names(*one), (std::vector<std::string>{"a-b", "b", "c", "z.txt"}));
    EXPECT_FALSE(one->truncated);
    EXPECT_EQ(one->entries[1].type, FileType::kDir);
    EXPECT_EQ(one->entries[1].name, "b");

    const proto::FileListRequest all_request{root_, "", 32, 10000};
    auto all = co_await client->listDir(all_request);
    CO_ASSERT_TRUE(all) << all.error().describe();
    EXPECT_EQ(names(*all), (std::vector<std::string>{"a-b", "a-b/x", "b", "b/inner", "b/inner/deep",
                                                     "b/inner/deep/three", "b/inner/two", "b/one",
                                                     "c", "c/to-b", "z.txt"}));
    EXPECT_EQ(all->entries[9].type, FileType::kSymlink);
    EXPECT_EQ(all->entries[9].symlink_target, root_ + "/b");

    const proto::FileListRequest two_request{root_, "", 2, 10000};
    auto two = co_await client->listDir(two_request);
    CO_ASSERT_TRUE(two);
    EXPECT_EQ(names(*two), (std::vector<std::string>{"a-b", "a-b/x", "b", "b/inner", "b/one", "c",
                                                     "c/to-b", "z.txt"}));

    const proto::FileListRequest truncated_request{root_, "", 32, 4};
    auto truncated = co_await client->listDir(truncated_request);
    CO_ASSERT_TRUE(truncated);
    EXPECT_TRUE(truncated->truncated);
    EXPECT_EQ(names(*truncated), (std::vector<std::string>{"a-b", "a-b/x", "b", "b/inner"}));
    const proto::FileListRequest exact_request{root_, "", 1, 4};
    auto exact = co_await client->listDir(exact_request);
    CO_ASSERT_TRUE(exact);
    EXPECT_FALSE(exact->truncated);
    EXPECT_EQ(exact->entries.size(), 4u);

    const proto::FileListRequest file_request{root_ + "/z.txt", "", 1, 10};
    auto file = co_await client->listDir(file_request);
    CO_ASSERT_FALSE(file);
    EXPECT_EQ(file.error().code(), Errc::kInvalidArgument);
    const proto::FileListRequest missing_request{root_ + "/none", "", 1, 10};
    auto missing = co_await client->listDir(missing_request);
    CO_ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    const proto::FileListRequest deep_request{root_, "", 33, 10};
    auto deep = co_await client->listDir(deep_request);
    CO_ASSERT_FALSE(deep);
    EXPECT_EQ(deep.error().code(), Errc::kInvalidArgument);
  });
}

TEST_F(AgentClientFilesTest, ALongListingComesInSeveralFrames) {
  // ~6000 entries with long names: about 3 MB of JSON, more than one frame can carry.
  const std::string dir = root_ + "/many";
  fs::create_directory(dir);
  for (int i = 0; i < 6000; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "%05d-", i);
    UniqueFd fd(::open((dir + "/" + name + std::string(200, 'n')).c_str(),
                       O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  }
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileListRequest list_request{dir, "", 1, 10000};
    auto list = co_await client->listDir(list_request);
    CO_ASSERT_TRUE(list) << list.error().describe();
    CO_ASSERT_EQ(list->entries.size(), 6000u);
    EXPECT_FALSE(list->truncated);
    EXPECT_EQ(list->entries[0].name.substr(0, 6), "00000-");
    EXPECT_EQ(list->entries[5999].name.substr(0, 6), "05999-");
    const proto::FileListRequest capped_request{dir, "", 1, 5000};
    auto capped = co_await client->listDir(capped_request);
    CO_ASSERT_TRUE(capped);
    EXPECT_EQ(capped->entries.size(), 5000u);
    EXPECT_TRUE(capped->truncated);
    EXPECT_EQ(capped->entries[4999].name.substr(0, 6), "04999-");
  });
}

TEST_F(AgentClientFilesTest, MakeDirWithParentsExistingAndAFileInTheWay) {
  writeFile(root_ + "/file", "x");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileMkdirRequest made_request{root_ + "/p/q/r", "", 0750, true};
    auto made = co_await client->makeDir(made_request);
    CO_ASSERT_TRUE(made) << made.error().describe();
    EXPECT_TRUE(made->created);
    EXPECT_EQ(made->entry.path, root_ + "/p/q/r");
    EXPECT_EQ(made->entry.type, FileType::kDir);
    EXPECT_EQ(made->entry.mode, 0750u);  // exactly, whatever the umask
    struct stat st {};
    ::stat((root_ + "/p/q").c_str(), &st);
    EXPECT_EQ(st.st_mode & 07777, 0755u);  // parents

    const proto::FileMkdirRequest again_request{root_ + "/p/q/r", "", 0700, true};
    auto again = co_await client->makeDir(again_request);
    CO_ASSERT_TRUE(again);
    EXPECT_FALSE(again->created);
    EXPECT_EQ(again->entry.mode, 0750u);

    const proto::FileMkdirRequest in_the_way_request{root_ + "/file", "", 0755, true};
    auto in_the_way = co_await client->makeDir(in_the_way_request);
    CO_ASSERT_FALSE(in_the_way);
    EXPECT_EQ(in_the_way.error().code(), Errc::kAlreadyExists);
    const proto::FileMkdirRequest below_file_request{root_ + "/file/sub", "", 0755, true};
    auto below_file = co_await client->makeDir(below_file_request);
    CO_ASSERT_FALSE(below_file);
    EXPECT_EQ(below_file.error().code(), Errc::kAlreadyExists);

    const proto::FileMkdirRequest no_parents_request{root_ + "/x/y", "", 0755, false};
    auto no_parents = co_await client->makeDir(no_parents_request);
    CO_ASSERT_FALSE(no_parents);
    EXPECT_EQ(no_parents.error().code(), Errc::kNotFound);
    const proto::FileMkdirRequest sticky_request{root_ + "/t", "", 01777, false};
    auto sticky = co_await client->makeDir(sticky_request);
    CO_ASSERT_TRUE(sticky);
    EXPECT_EQ(sticky->entry.permissions, "drwxrwxrwt");
  });
}

TEST_F(AgentClientFilesTest, MoveWithAndWithoutOverwrite) {
  writeFile(root_ + "/a", "A");
  writeFile(root_ + "/b", "B");
  fs::create_directories(root_ + "/full/x");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileMoveRequest refused_request{root_ + "/a", root_ + "/b", "", false};
    auto refused = co_await client->move(refused_request);
    CO_ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), Errc::kAlreadyExists);
    EXPECT_EQ(readFile(root_ + "/b"), "B");
    const proto::FileMoveRequest replaced_request{root_ + "/a", root_ + "/b", "", true};
    auto replaced = co_await client->move(replaced_request);
    CO_ASSERT_TRUE(replaced) << replaced.error().describe();
    EXPECT_EQ(replaced->path, root_ + "/b");
    EXPECT_EQ(replaced->size, 1u);
    EXPECT_EQ(readFile(root_ + "/b"), "A");
    EXPECT_FALSE(fs::exists(root_ + "/a"));
    const proto::FileMoveRequest renamed_request{root_ + "/b", root_ + "/c", "", false};
    auto renamed = co_await client->move(renamed_request);
    CO_ASSERT_TRUE(renamed);
    EXPECT_EQ(readFile(root_ + "/c"), "A");
    const proto::FileMoveRequest missing_request{root_ + "/nope", root_ + "/d", "", false};
    auto missing = co_await client->move(missing_request);
    CO_ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    const proto::FileMoveRequest over_dir_request{root_ + "/c", root_ + "/full", "", true};
    auto over_dir = co_await client->move(over_dir_request);
    CO_ASSERT_FALSE(over_dir);
    EXPECT_EQ(over_dir.error().code(), Errc::kInvalidArgument);
    const proto::FileMoveRequest into_itself_request{root_ + "/full", root_ + "/full/x/y", "",
                                                     false};
    auto into_itself = co_await client->move(into_itself_request);
    CO_ASSERT_FALSE(into_itself);
    EXPECT_EQ(into_itself.error().code(), Errc::kInvalidArgument);
    const proto::FileMoveRequest dir_request{root_ + "/full", root_ + "/moved", "", false};
    auto dir = co_await client->move(dir_request);
    CO_ASSERT_TRUE(dir);
    EXPECT_EQ(dir->type, FileType::kDir);
    EXPECT_TRUE(fs::exists(root_ + "/moved/x"));
  });
}

TEST_F(AgentClientFilesTest, RemoveFilesDirectoriesAndSymlinksWithoutFollowingThem) {
  fs::create_directories(root_ + "/tree/a/b");
  writeFile(root_ + "/tree/a/b/f", "f");
  writeFile(root_ + "/tree/g", "g");
  fs::create_directories(root_ + "/outside/keep");
  writeFile(root_ + "/outside/keep/precious", "p");
  fs::create_directory_symlink(root_ + "/outside", root_ + "/tree/a/link-out");
  fs::create_directory_symlink(root_ + "/outside", root_ + "/link");
  writeFile(root_ + "/file", "x");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileRemoveRequest not_empty_request{root_ + "/tree", "", false};
    auto not_empty = co_await client->remove(not_empty_request);
    CO_ASSERT_FALSE(not_empty);
    EXPECT_EQ(not_empty.error().code(), Errc::kFailedPrecondition);
    EXPECT_NE(not_empty.error().message().find("recursive"), std::string::npos);
    EXPECT_TRUE(fs::exists(root_ + "/tree/g"));

    const proto::FileRemoveRequest tree_request{root_ + "/tree", "", true};
    auto tree = co_await client->remove(tree_request);
    CO_ASSERT_TRUE(tree) << tree.error().describe();
    EXPECT_FALSE(fs::exists(root_ + "/tree"));
    EXPECT_EQ(readFile(root_ + "/outside/keep/precious"), "p");  // not through the link

    const proto::FileRemoveRequest link_request{root_ + "/link", "", true};
    auto link = co_await client->remove(link_request);
    CO_ASSERT_TRUE(link) << link.error().describe();
    EXPECT_FALSE(fs::is_symlink(root_ + "/link"));
    EXPECT_EQ(readFile(root_ + "/outside/keep/precious"), "p");

    const proto::FileRemoveRequest remove_file{root_ + "/file", "", false};
    CO_ASSERT_TRUE(co_await client->remove(remove_file));
    EXPECT_FALSE(fs::exists(root_ + "/file"));
    const proto::FileRemoveRequest missing_request{root_ + "/file", "", false};
    auto missing = co_await client->remove(missing_request);
    CO_ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    fs::create_directory(root_ + "/empty");
    const proto::FileRemoveRequest remove_empty{root_ + "/empty", "", false};
    CO_ASSERT_TRUE(co_await client->remove(remove_empty));
    const proto::FileRemoveRequest slash_request{"/", "", true};
    auto slash = co_await client->remove(slash_request);
    CO_ASSERT_FALSE(slash);
    EXPECT_EQ(slash.error().code(), Errc::kInvalidArgument);
  });
}

TEST_F(AgentClientFilesTest, ReadsFiveMebibytesByteExact) {
  const std::string content = randomBytes(5 << 20, 7);
  writeFile(root_ + "/big", content, 0600);
  writeFile(root_ + "/empty", "");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileReadRequest reader_request{root_ + "/big", ""};
    auto reader = co_await client->openRead(reader_request);
    CO_ASSERT_TRUE(reader) << reader.error().describe();
    EXPECT_EQ((*reader)->info().size, content.size());
    EXPECT_EQ((*reader)->info().mode, 0600u);
    auto all = co_await readAll(**reader);
    CO_ASSERT_TRUE(all) << all.error().describe();
    EXPECT_TRUE(*all == content) << all->size();
    auto after = co_await (*reader)->next();
    CO_ASSERT_TRUE(after);
    EXPECT_FALSE(after->has_value());

    const proto::FileReadRequest empty_request{root_ + "/empty", ""};
    auto empty = co_await client->openRead(empty_request);
    CO_ASSERT_TRUE(empty);
    auto nothing = co_await readAll(**empty);
    CO_ASSERT_TRUE(nothing);
    EXPECT_EQ(*nothing, "");
  });
}

TEST_F(AgentClientFilesTest, ReadingHonoursTheWindow) {
  writeFile(root_ + "/big", randomBytes(4 << 20, 3));
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileReadRequest reader_request{root_ + "/big", ""};
    auto reader = co_await client->openRead(reader_request);
    CO_ASSERT_TRUE(reader);
    co_await sleepFor(300ms);  // nothing consumed: the agent stops at the window
    EXPECT_EQ((*reader)->bytesReceived(), proto::kInitialWindow);
    auto chunk = co_await (*reader)->next();
    CO_ASSERT_TRUE(chunk && chunk->has_value());
    // Aborting midway is clean, and the connection goes on.
    (*reader)->close();
    auto closed = co_await (*reader)->next();
    CO_ASSERT_FALSE(closed);
    EXPECT_EQ(closed.error().code(), Errc::kCancelled);
    EXPECT_TRUE(co_await client->ping(30s));
    // Many readers at once, interleaved.
    std::vector<std::shared_ptr<FileReader>> readers;
    for (int i = 0; i < 8; ++i) {
      const proto::FileReadRequest r_request{root_ + "/big", ""};
      auto r = co_await client->openRead(r_request);
      CO_ASSERT_TRUE(r);
      readers.push_back(*r);
    }
    std::vector<size_t> sizes(readers.size(), 0);
    for (bool more = true; more;) {
      more = false;
      for (size_t i = 0; i < readers.size(); ++i) {
        auto c = co_await readers[i]->next();
        CO_ASSERT_TRUE(c);
        if (c->has_value()) {
          sizes[i] += (*c)->size();
          more = true;
        }
      }
    }
    for (size_t size : sizes) EXPECT_EQ(size, size_t{4} << 20);
  });
}

TEST_F(AgentClientFilesTest, ReadErrors) {
  fs::create_directory(root_ + "/dir");
  ::mkfifo((root_ + "/fifo").c_str(), 0644);
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileReadRequest missing_request{root_ + "/missing", ""};
    auto missing = co_await client->openRead(missing_request);
    CO_ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    const proto::FileReadRequest dir_request{root_ + "/dir", ""};
    auto dir = co_await client->openRead(dir_request);
    CO_ASSERT_FALSE(dir);
    EXPECT_EQ(dir.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(dir.error().message().find(root_ + "/dir"), std::string::npos);
    const proto::FileReadRequest fifo_request{root_ + "/fifo", ""};
    auto fifo = co_await client->openRead(fifo_request);  // must not hang
    CO_ASSERT_FALSE(fifo);
    EXPECT_EQ(fifo.error().code(), Errc::kInvalidArgument);
  });
}

TEST_F(AgentClientFilesTest, WritesByteExactWithParents) {
  const std::string content = randomBytes((5 << 20) + 17, 11);
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileWriteRequest info_request{root_ + "/new/dirs/file.bin", "", {}, "", "", true};
    auto info = co_await writeAll(*client, info_request, content);
    CO_ASSERT_TRUE(info) << info.error().describe();
    EXPECT_EQ(info->path, root_ + "/new/dirs/file.bin");
    EXPECT_EQ(info->size, content.size());
    EXPECT_EQ(info->mode, 0644u);
    EXPECT_EQ(info->uid, ::geteuid());
    EXPECT_TRUE(readFile(root_ + "/new/dirs/file.bin") == content);
    struct stat st {};
    ::stat((root_ + "/new/dirs").c_str(), &st);
    EXPECT_EQ(st.st_mode & 07777, 0755u);
    EXPECT_TRUE(tempFiles(root_ + "/new/dirs").empty());

    const proto::FileWriteRequest no_parents_request{root_ + "/none/file", "", {}, "", "", false};
    auto no_parents = co_await client->openWrite(no_parents_request);
    CO_ASSERT_FALSE(no_parents);
    EXPECT_EQ(no_parents.error().code(), Errc::kNotFound);
    const proto::FileWriteRequest onto_dir_request{root_ + "/new", "", {}, "", "", true};
    auto onto_dir = co_await client->openWrite(onto_dir_request);
    CO_ASSERT_FALSE(onto_dir);
    EXPECT_EQ(onto_dir.error().code(), Errc::kInvalidArgument);
    const proto::FileWriteRequest empty_request{root_ + "/empty", "", 0600, "", "", true};
    auto empty = co_await writeAll(*client, empty_request, "");
    CO_ASSERT_TRUE(empty);
    EXPECT_EQ(empty->size, 0u);
    EXPECT_EQ(empty->mode, 0600u);
  });
}

TEST_F(AgentClientFilesTest, AnExistingFileKeepsItsModeUnlessToldAndASymlinkIsFollowed) {
  writeFile(root_ + "/script", "old", 0751);
  fs::create_symlink("script", root_ + "/link");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileWriteRequest kept_request{root_ + "/script", "", {}, "", "", true};
    auto kept = co_await writeAll(*client, kept_request, "new");
    CO_ASSERT_TRUE(kept) << kept.error().describe();
    EXPECT_EQ(kept->mode, 0751u);
    EXPECT_EQ(readFile(root_ + "/script"), "new");
    const proto::FileWriteRequest changed_request{root_ + "/script", "", 04700, "", "", true};
    auto changed = co_await writeAll(*client, changed_request, "x");
    CO_ASSERT_TRUE(changed);
    EXPECT_EQ(changed->mode, 04700u);
    EXPECT_EQ(changed->permissions, "-rws------");
    const proto::FileWriteRequest through_request{root_ + "/link", "", {}, "", "", true};
    auto through = co_await writeAll(*client, through_request, "via");
    CO_ASSERT_TRUE(through) << through.error().describe();
    EXPECT_EQ(through->path, root_ + "/script");
    EXPECT_TRUE(fs::is_symlink(root_ + "/link"));
    EXPECT_EQ(readFile(root_ + "/script"), "via");
  });
}

TEST_F(AgentClientFilesTest, WritesSetTheOwnerAndAnExistingFileKeepsIts) {
  if (::geteuid() != 0) GTEST_SKIP() << "Needs root to give files away";
  const passwd* nobody = ::getpwnam("nobody");
  if (!nobody) GTEST_SKIP() << "No user nobody";
  writeFile(root_ + "/theirs", "old", 0640);
  ::chown((root_ + "/theirs").c_str(), nobody->pw_uid, nobody->pw_gid);
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::FileWriteRequest kept_request{root_ + "/theirs", "", {}, "", "", true};
    auto kept = co_await writeAll(*client, kept_request, "new");
    CO_ASSERT_TRUE(kept) << kept.error().describe();
    EXPECT_EQ(kept->uid, nobody->pw_uid);
    EXPECT_EQ(kept->gid, nobody->pw_gid);
    EXPECT_EQ(kept->owner, "nobody");
    EXPECT_EQ(kept->mode, 0640u);
    const proto::FileWriteRequest given_request{root_ + "/given", "", 0600, "nobody", "0", true};
    auto given = co_await writeAll(*client, given_request, "g");
    CO_ASSERT_TRUE(given) << given.error().describe();
    EXPECT_EQ(given->uid, nobody->pw_uid);
    EXPECT_EQ(given->gid, 0u);
    struct stat st {};
    ::stat((root_ + "/given").c_str(), &st);
    EXPECT_EQ(st.st_uid, nobody->pw_uid);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    const proto::FileWriteRequest bad_owner_request{root_ + "/x",         "", {},
                                                    "no-such-user-hutch", "", true};
    auto bad_owner = co_await client->openWrite(bad_owner_request);
    CO_ASSERT_FALSE(bad_owner);
    EXPECT_EQ(bad_owner.error().code(), Errc::kNotFound);
  });
}

TEST_F(AgentClientFilesTest, AnAbortedWriteLeavesTheOldContentAndNoTemporaryFile) {
  writeFile(root_ + "/target", "old content");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    {
      const proto::FileWriteRequest writer_request{root_ + "/target", "", {}, "", "", true};
      auto writer = co_await client->openWrite(writer_request);
      CO_ASSERT_TRUE(writer) << writer.error().describe();
      EXPECT_EQ((*writer)->path(), root_ + "/target");
      const std::string megabyte = randomBytes(1 << 20, 1);
      CO_ASSERT_TRUE(co_await (*writer)->write(megabyte));
      EXPECT_EQ(tempFiles(root_).size(), 1u);
      (*writer)->abort();
      auto later = co_await (*writer)->write("more");
      CO_ASSERT_FALSE(later);
      auto finished = co_await (*writer)->finish();
      CO_ASSERT_FALSE(finished);
    }
    EXPECT_TRUE(co_await noTempFilesSoon(root_)) << tempFiles(root_)[0];
    EXPECT_EQ(readFile(root_ + "/target"), "old content");
    {
      // Dropped without finish(): the same.
      const proto::FileWriteRequest writer_request2{root_ + "/target", "", {}, "", "", true};
      auto writer = co_await client->openWrite(writer_request2);
      CO_ASSERT_TRUE(writer);
      CO_ASSERT_TRUE(co_await (*writer)->write("partial"));
    }
    EXPECT_TRUE(co_await noTempFilesSoon(root_));
    EXPECT_EQ(readFile(root_ + "/target"), "old content");
    // The connection lost mid-write (the box's host went away): the same.
    const proto::FileWriteRequest writer_request3{root_ + "/target", "", {}, "", "", true};
    auto writer = co_await client->openWrite(writer_request3);
    CO_ASSERT_TRUE(writer);
    const std::string some = randomBytes(300000, 2);
    CO_ASSERT_TRUE(co_await (*writer)->write(some));
    client->close();
    auto after_close = co_await (*writer)->finish();
    CO_ASSERT_FALSE(after_close);
    EXPECT_EQ(after_close.error().code(), Errc::kCancelled);
    EXPECT_TRUE(co_await noTempFilesSoon(root_));
    EXPECT_EQ(readFile(root_ + "/target"), "old content");
  });
}

TEST_F(AgentClientFilesTest, WatchReportsCreateWriteRemoveRenameAndChmod) {
  const std::string dir = root_ + "/watched";
  fs::create_directory(dir);
  writeFile(dir + "/existing", "e");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::WatchRequest watch_request{dir, "", false};
    auto watch = co_await client->watch(watch_request);
    CO_ASSERT_TRUE(watch) << watch.error().describe();
    EXPECT_EQ((*watch)->info().path, dir);
    EXPECT_EQ((*watch)->info().type, FileType::kDir);

    writeFile(dir + "/new", "hello");  // create, write (and chmod)
    const std::string want1 = dir + "/new";
    auto created = co_await eventsUntil(*watch, FileEventType::kWrite, want1);
    EXPECT_TRUE(contains(created, FileEventType::kCreate, dir + "/new")) << describe(created);
    EXPECT_TRUE(contains(created, FileEventType::kWrite, dir + "/new")) << describe(created);

    ::chmod((dir + "/existing").c_str(), 0600);
    const std::string want2 = dir + "/existing";
    auto chmodded = co_await eventsUntil(*watch, FileEventType::kChmod, want2);
    EXPECT_TRUE(contains(chmodded, FileEventType::kChmod, dir + "/existing")) << describe(chmodded);

    fs::rename(dir + "/new", dir + "/renamed");
    const std::string want3 = dir + "/renamed";
    auto renamed = co_await eventsUntil(*watch, FileEventType::kCreate, want3);
    EXPECT_TRUE(contains(renamed, FileEventType::kRename, dir + "/new")) << describe(renamed);
    EXPECT_TRUE(contains(renamed, FileEventType::kCreate, dir + "/renamed")) << describe(renamed);

    fs::remove(dir + "/renamed");
    const std::string want4 = dir + "/renamed";
    auto removed = co_await eventsUntil(*watch, FileEventType::kRemove, want4);
    EXPECT_TRUE(contains(removed, FileEventType::kRemove, dir + "/renamed")) << describe(removed);

    // Not recursive: a subdirectory's contents are not watched.
    fs::create_directory(dir + "/sub");
    writeFile(dir + "/sub/inner", "i");
    writeFile(dir + "/marker", "m");
    const std::string want5 = dir + "/marker";
    auto flat = co_await eventsUntil(*watch, FileEventType::kCreate, want5);
    EXPECT_TRUE(contains(flat, FileEventType::kCreate, dir + "/sub")) << describe(flat);
    EXPECT_FALSE(contains(flat, FileEventType::kCreate, dir + "/sub/inner")) << describe(flat);

    // The directory removed: its remove event, then the end of the watch.
    fs::remove_all(dir);
    auto gone = co_await eventsUntil(*watch, FileEventType::kRemove, dir);
    EXPECT_TRUE(contains(gone, FileEventType::kRemove, dir)) << describe(gone);
    bool ended = false;
    for (int i = 0; i < 10 && !ended; ++i) {
      auto batch = co_await (*watch)->next();
      CO_ASSERT_TRUE(batch) << batch.error().describe();
      ended = !batch->has_value();
    }
    EXPECT_TRUE(ended);
    EXPECT_TRUE(co_await client->ping(30s));
  });
}

TEST_F(AgentClientFilesTest, RecursiveWatchCoversNewSubdirectories) {
  const std::string dir = root_ + "/tree";
  fs::create_directories(dir + "/old/deeper");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::WatchRequest watch_request{dir, "", true};
    auto watch = co_await client->watch(watch_request);
    CO_ASSERT_TRUE(watch) << watch.error().describe();
    writeFile(dir + "/old/deeper/f", "x");
    const std::string want6 = dir + "/old/deeper/f";
    auto existing = co_await eventsUntil(*watch, FileEventType::kCreate, want6);
    EXPECT_TRUE(contains(existing, FileEventType::kCreate, dir + "/old/deeper/f"))
        << describe(existing);

    // Made right after the directory: seen by the new watch, or reported when it is added.
    fs::create_directories(dir + "/new/a/b");
    writeFile(dir + "/new/a/b/file", "y");
    const std::string want7 = dir + "/new/a/b/file";
    auto fresh = co_await eventsUntil(*watch, FileEventType::kCreate, want7);
    EXPECT_TRUE(contains(fresh, FileEventType::kCreate, dir + "/new")) << describe(fresh);
    EXPECT_TRUE(contains(fresh, FileEventType::kCreate, dir + "/new/a/b/file")) << describe(fresh);
    writeFile(dir + "/new/a/later", "z");
    const std::string want8 = dir + "/new/a/later";
    auto later = co_await eventsUntil(*watch, FileEventType::kCreate, want8);
    EXPECT_TRUE(contains(later, FileEventType::kCreate, dir + "/new/a/later")) << describe(later);

    // A directory moved within the tree is watched under its new name.
    fs::rename(dir + "/new", dir + "/moved");
    const std::string want9 = dir + "/moved";
    auto moved = co_await eventsUntil(*watch, FileEventType::kCreate, want9);
    EXPECT_TRUE(contains(moved, FileEventType::kRename, dir + "/new")) << describe(moved);
    co_await sleepFor(200ms);  // the new watches are added on the agent's worker
    writeFile(dir + "/moved/a/b/after-move", "w");
    const std::string want10 = dir + "/moved/a/b/after-move";
    auto after = co_await eventsUntil(*watch, FileEventType::kCreate, want10);
    EXPECT_TRUE(contains(after, FileEventType::kCreate, dir + "/moved/a/b/after-move"))
        << describe(after);
    (*watch)->close();
    EXPECT_TRUE(co_await client->ping(30s));
  });
}

TEST_F(AgentClientFilesTest, WatchErrors) {
  writeFile(root_ + "/file", "x");
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    const proto::WatchRequest missing_request{root_ + "/none", "", false};
    auto missing = co_await client->watch(missing_request);
    CO_ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    const proto::WatchRequest file_request{root_ + "/file", "", true};
    auto file = co_await client->watch(file_request);
    CO_ASSERT_FALSE(file);
    EXPECT_EQ(file.error().code(), Errc::kInvalidArgument);
  });
}

TEST_F(AgentClientFilesTest, OperationsRunWithTheUsersCredentials) {
  if (::geteuid() != 0) GTEST_SKIP() << "Needs root to act as another user";
  const passwd* nobody = ::getpwnam("nobody");
  if (!nobody) GTEST_SKIP() << "No user nobody";
  const std::string dir = sharedDir("shared");
  writeFile(dir + "/secret", "root only", 0600);
  fs::create_directory(dir + "/private");
  ::chmod((dir + "/private").c_str(), 0700);
  writeFile(dir + "/readonly", "ro", 0644);
  run([&]() -> asio::awaitable<void> {
    auto client = co_await connect();
    CO_ASSERT_TRUE(client);
    // Root's CAP_DAC_OVERRIDE does not carry over to the user.
    const proto::FileReadRequest secret_request{dir + "/secret", "nobody"};
    auto secret = co_await client->openRead(secret_request);
    CO_ASSERT_FALSE(secret);
    EXPECT_EQ(secret.error().code(), Errc::kFailedPrecondition);
    EXPECT_NE(secret.error().message().find("Permission denied: " + dir +
                                            "/secret (as user "
                                            "nobody)"),
              std::string::npos)
        << secret.error().message();
    const proto::FileReadRequest as_root_request{dir + "/secret", ""};
    auto as_root = co_await client->openRead(as_root_request);
    CO_ASSERT_TRUE(as_root);
    auto content = co_await readAll(**as_root);
    CO_ASSERT_TRUE(content);
    EXPECT_EQ(*content, "root only");
    const proto::FileListRequest private_list_request{dir + "/private", "nobody", 1, 10};
    auto private_list = co_await client->listDir(private_list_request);
    CO_ASSERT_FALSE(private_list);
    EXPECT_EQ(private_list.error().code(), Errc::kFailedPrecondition);
    const proto::FileWriteRequest private_write_request{
        dir + "/private/x", "nobody", {}, "", "", true};
    auto private_write = co_await client->openWrite(private_write_request);
    CO_ASSERT_FALSE(private_write);
    EXPECT_EQ(private_write.error().code(), Errc::kFailedPrecondition);
    // Replacing a file takes the right to write it, not only its directory.
    const proto::FileWriteRequest readonly_request{dir + "/readonly", "nobody", {}, "", "", true};
    auto readonly = co_await client->openWrite(readonly_request);
    CO_ASSERT_FALSE(readonly);
    EXPECT_EQ(readonly.error().code(), Errc::kFailedPrecondition);
    EXPECT_EQ(readFile(dir + "/readonly"), "ro");
    const proto::FileRemoveRequest remove_request{dir + "/secret", "nobody", false};
    auto remove = co_await client->remove(remove_request);
    EXPECT_TRUE(remove) << "a 0777 directory lets anyone remove: " << remove.error().describe();

    // What the user makes is the user's.
    const proto::FileWriteRequest written_request{dir + "/mine/file", "nobody", {}, "", "", true};
    auto written = co_await writeAll(*client, written_request, "mine");
    CO_ASSERT_TRUE(written) << written.error().describe();
    EXPECT_EQ(written->uid, nobody->pw_uid);
    EXPECT_EQ(written->gid, nobody->pw_gid);
    struct stat st {};
    ::stat((dir + "/mine").c_str(), &st);
    EXPECT_EQ(st.st_uid, nobody->pw_uid);
    const proto::FileMkdirRequest made_request{dir + "/made", "nobody", 0700, true};
    auto made = co_await client->makeDir(made_request);
    CO_ASSERT_TRUE(made);
    EXPECT_EQ(made->entry.uid, nobody->pw_uid);
    EXPECT_EQ(made->entry.owner, "nobody");
    // A user cannot give files away.
    const proto::FileWriteRequest give_request{dir + "/gift", "nobody", {}, "root", "", true};
    auto give = co_await client->openWrite(give_request);
    CO_ASSERT_TRUE(give);
    CO_ASSERT_TRUE(co_await (*give)->write("x"));
    auto given = co_await (*give)->finish();
    CO_ASSERT_FALSE(given);
    EXPECT_EQ(given.error().code(), Errc::kFailedPrecondition);
    EXPECT_FALSE(fs::exists(dir + "/gift"));
    EXPECT_TRUE(co_await noTempFilesSoon(dir));
    // The worker went back to root after each operation.
    const proto::FileReadRequest root_again_request{dir + "/readonly", ""};
    auto root_again = co_await client->openRead(root_again_request);
    CO_ASSERT_TRUE(root_again);
    const proto::WatchRequest watch_private_request{dir + "/private", "nobody", false};
    auto watch_private = co_await client->watch(watch_private_request);
    CO_ASSERT_FALSE(watch_private);
    EXPECT_EQ(watch_private.error().code(), Errc::kFailedPrecondition);
    // Exec as a user still works now that the agent has worker threads.
    proto::ExecRequest id = command({"id", "-u"});
    id.user = "nobody";
    auto ran = co_await runCommand(*client, id);
    CO_ASSERT_TRUE(ran.exit.has_value());
    EXPECT_EQ(ran.out, std::to_string(nobody->pw_uid) + "\n");
  });
}

// --- A scripted agent, to check what AgentClient accepts from a box. ---

// Answers kHello with capabilities, then every other frame with what respond() returns.
class ScriptedAgent {
 public:
  using Respond = std::function<std::string(const proto::Frame&)>;

  ScriptedAgent(asio::io_context& io, const std::string& path,
                std::vector<std::string> capabilities, Respond respond)
      : acceptor_(io, asio::local::stream_protocol::endpoint(path)),
        capabilities_(std::move(capabilities)),
        respond_(std::move(respond)) {}

  asio::awaitable<void> serve() {
    auto socket = co_await acceptor_.async_accept(asio::use_awaitable);
    proto::FrameDecoder decoder;
    char buffer[65536];
    while (true) {
      boost::system::error_code ec;
      const size_t n = co_await socket.async_read_some(
          asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      decoder.feed(std::span<const char>(buffer, n));
      while (auto frame = decoder.next()) {
        if (!*frame) break;
        received_.push_back(**frame);
        std::string reply;
        if ((*frame)->type == proto::FrameType::kHello) {
          proto::encodeFrame(proto::makeFrame(proto::FrameType::kHelloAck, 0,
                                              proto::HelloAck{1, "scripted", capabilities_}),
                             reply);
        } else if ((*frame)->type == proto::FrameType::kPing) {
          proto::encodeFrame(proto::Frame{proto::FrameType::kPong, 0, (*frame)->payload}, reply);
        } else {
          reply = respond_(**frame);
        }
        if (!reply.empty()) {
          co_await asio::async_write(socket, asio::buffer(reply),
                                     asio::redirect_error(asio::use_awaitable, ec));
        }
      }
    }
  }

  const std::vector<proto::Frame>& received() const { return received_; }

 private:
  asio::local::stream_protocol::acceptor acceptor_;
  std::vector<std::string> capabilities_;
  Respond respond_;
  std::vector<proto::Frame> received_;
};

std::string frame(proto::FrameType type, uint32_t stream, std::string payload) {
  return proto::encodeFrame(proto::Frame{type, stream, std::move(payload)});
}

proto::FileInfo goodInfo() {
  proto::FileInfo info;
  info.name = "f";
  info.path = "/f";
  info.permissions = "-rw-r--r--";
  info.owner = "root";
  info.group = "root";
  return info;
}

TEST_F(AgentClientFilesTest, FilesNeedTheAgentsCapability) {
  const std::string path = agent_->dir() + "/old.sock";
  ScriptedAgent old(io_, path, {"exec", "tcp"}, [](const proto::Frame&) { return ""; });
  asio::co_spawn(io_, old.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    auto channel =
        co_await connectUnix(io_.get_executor(), path, std::chrono::steady_clock::now() + 30s);
    CO_ASSERT_TRUE(channel);
    auto client = AgentClient::create(std::move(*channel));
    clients_.push_back(client);
    CO_ASSERT_TRUE(co_await client->handshake(30s));
    const proto::FileStatRequest stat_request{"/", "", false};
    auto stat = co_await client->stat(stat_request);
    CO_ASSERT_FALSE(stat);
    EXPECT_EQ(stat.error().code(), Errc::kUnsupported);
    EXPECT_NE(stat.error().message().find("\"files\""), std::string::npos);
    const proto::FileListRequest listDir_request{"/", "", 1, 10};
    auto listDir_result = co_await client->listDir(listDir_request);
    EXPECT_EQ(listDir_result.error().code(), Errc::kUnsupported);
    const proto::FileMkdirRequest makeDir_request{"/x", "", 0755, true};
    auto makeDir_result = co_await client->makeDir(makeDir_request);
    EXPECT_EQ(makeDir_result.error().code(), Errc::kUnsupported);
    const proto::FileMoveRequest move_request{"/a", "/b", "", false};
    auto move_result = co_await client->move(move_request);
    EXPECT_EQ(move_result.error().code(), Errc::kUnsupported);
    const proto::FileRemoveRequest remove_request{"/a", "", false};
    auto remove_result = co_await client->remove(remove_request);
    EXPECT_EQ(remove_result.error().code(), Errc::kUnsupported);
    const proto::FileReadRequest openRead_request{"/a", ""};
    auto openRead_result = co_await client->openRead(openRead_request);
    EXPECT_EQ(openRead_result.error().code(), Errc::kUnsupported);
    const proto::FileWriteRequest openWrite_request{"/a", "", {}, "", "", true};
    auto openWrite_result = co_await client->openWrite(openWrite_request);
    EXPECT_EQ(openWrite_result.error().code(), Errc::kUnsupported);
    const proto::WatchRequest watch_request{"/", "", false};
    auto watch_result = co_await client->watch(watch_request);
    EXPECT_EQ(watch_result.error().code(), Errc::kUnsupported);
    // Nothing was sent that the old agent would take for a broken connection.
    EXPECT_TRUE(co_await client->ping(30s));
    for (const auto& f : old.received()) {
      EXPECT_TRUE(f.type == proto::FrameType::kHello || f.type == proto::FrameType::kPing)
          << static_cast<int>(f.type);
    }
  });
}

TEST_F(AgentClientFilesTest, WhatABoxSendsIsChecked) {
  const std::string path = agent_->dir() + "/hostile.sock";
  // Answers by request path: every answer breaks a rule.
  ScriptedAgent hostile(io_, path, {"exec", "files", "watch"}, [](const proto::Frame& f) {
    using proto::FrameType;
    std::string reply;
    if (f.type == FrameType::kFileStat) {
      // A FileInfo with an unknown type.
      std::string bad = proto::encodeMessage(goodInfo());
      bad.replace(bad.find("\"file\""), 6, "\"socket\"");
      return frame(FrameType::kResult, f.stream, bad);
    }
    if (f.type == FrameType::kFileList) {
      proto::FileList list{{goodInfo(), goodInfo(), goodInfo()}, false};
      return frame(FrameType::kFileEntries, f.stream, proto::encodeMessage(list)) +
             frame(FrameType::kResult, f.stream, proto::encodeMessage(list));
    }
    if (f.type == FrameType::kFileRead) {
      auto request = proto::decodeMessage<proto::FileReadRequest>(f.payload);
      if (request && request->path == "/before-open") {
        return frame(FrameType::kData, f.stream, "x");
      }
      reply = frame(FrameType::kFileOpened, f.stream, proto::encodeMessage(goodInfo()));
      if (request && request->path == "/big-frame") {
        return reply +
               frame(FrameType::kData, f.stream, std::string(proto::kMaxDataPayload + 1, 'd'));
      }
      // More than the window, in frames that are each allowed.
      for (uint32_t sent = 0; sent <= proto::kInitialWindow; sent += proto::kMaxDataPayload) {
        reply += frame(FrameType::kData, f.stream, std::string(proto::kMaxDataPayload, 'd'));
      }
      return reply;
    }
    if (f.type == FrameType::kFileWrite) {
      // Opened, then more window than the host ever used.
      return frame(FrameType::kFileOpened, f.stream, R"({"path":"/f"})") +
             frame(FrameType::kWindow, f.stream, proto::encodeWindow(1u << 30));
    }
    if (f.type == FrameType::kWatch) {
      return frame(FrameType::kFileOpened, f.stream, proto::encodeMessage(goodInfo())) +
             frame(FrameType::kFileEvents, f.stream,
                   R"({"events":[{"type":"create","path":"relative"}]})");
    }
    return reply;
  });
  asio::co_spawn(io_, hostile.serve(), asio::detached);
  run([&]() -> asio::awaitable<void> {
    auto channel =
        co_await connectUnix(io_.get_executor(), path, std::chrono::steady_clock::now() + 30s);
    CO_ASSERT_TRUE(channel);
    auto client = AgentClient::create(std::move(*channel));
    clients_.push_back(client);
    CO_ASSERT_TRUE(co_await client->handshake(30s));
    const proto::FileStatRequest stat_request{"/f", "", false};
    auto stat = co_await client->stat(stat_request);
    CO_ASSERT_FALSE(stat);
    EXPECT_EQ(stat.error().code(), Errc::kProtocol);
    const proto::FileListRequest list_request{"/", "", 1, 5};
    auto list = co_await client->listDir(list_request);  // 6 entries come
    CO_ASSERT_FALSE(list);
    EXPECT_EQ(list.error().code(), Errc::kProtocol);
    const proto::FileReadRequest early_request{"/before-open", ""};
    auto early = co_await client->openRead(early_request);
    CO_ASSERT_FALSE(early);
    EXPECT_EQ(early.error().code(), Errc::kProtocol);
    const proto::FileReadRequest reader_request{"/f", ""};
    auto reader = co_await client->openRead(reader_request);
    CO_ASSERT_TRUE(reader);
    co_await sleepFor(300ms);  // nothing consumed, so nothing granted: the excess arrives
    auto all = co_await readAll(**reader);
    CO_ASSERT_FALSE(all);
    EXPECT_EQ(all.error().code(), Errc::kProtocol);
    const proto::FileReadRequest big_frame{"/big-frame", ""};
    auto big = co_await client->openRead(big_frame);
    CO_ASSERT_TRUE(big);
    auto big_all = co_await readAll(**big);
    CO_ASSERT_FALSE(big_all);
    EXPECT_EQ(big_all.error().code(), Errc::kProtocol);
    const proto::FileWriteRequest writer_request{"/f", "", {}, "", "", true};
    auto writer = co_await client->openWrite(writer_request);
    CO_ASSERT_FALSE(writer);
    EXPECT_EQ(writer.error().code(), Errc::kProtocol);
    const proto::WatchRequest watch_request{"/", "", false};
    auto watch = co_await client->watch(watch_request);
    CO_ASSERT_TRUE(watch);
    auto batch = co_await (*watch)->next();
    CO_ASSERT_FALSE(batch);
    EXPECT_EQ(batch.error().code(), Errc::kProtocol);
    // Each bad stream was aborted on its own; the connection goes on.
    EXPECT_TRUE(client->isOpen());
    EXPECT_TRUE(co_await client->ping(30s));
    int closes = 0;
    for (const auto& f : hostile.received()) closes += f.type == proto::FrameType::kClose;
    EXPECT_GE(closes, 5);
  });
}

}  // namespace
}  // namespace hutch::guest

// File requests through AgentClient and the real agent (--listen): stat, list, mkdir, move,
// remove, the credentials they run with, and what AgentClient accepts from a box (a scripted
// hostile agent). The agent works in the test's temp directory; what needs root (other users,
// owners) skips without it. Read, write and watch streams: agent_client_file_streams_test.cc.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "guest/agent_client.h"
#include "guest/testing/files_test_support.h"
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
    EXPECT_EQ(secret.error().code(), Errc::kPermissionDenied);
    EXPECT_NE(secret.error().message().find("Permission denied: " + dir +
                                            "/secret (as user "
                                            "nobody)"),
              std::string::npos)
        << secret.error().message();
    const proto::FileReadRequest numeric_request{dir + "/secret", "1000"};
    auto numeric = co_await client->openRead(numeric_request);
    CO_ASSERT_FALSE(numeric);
    EXPECT_EQ(numeric.error().code(), Errc::kPermissionDenied);
    const proto::FileReadRequest as_root_request{dir + "/secret", ""};
    auto as_root = co_await client->openRead(as_root_request);
    CO_ASSERT_TRUE(as_root);
    auto content = co_await readAll(**as_root);
    CO_ASSERT_TRUE(content);
    EXPECT_EQ(*content, "root only");
    const proto::FileListRequest private_list_request{dir + "/private", "nobody", 1, 10};
    auto private_list = co_await client->listDir(private_list_request);
    CO_ASSERT_FALSE(private_list);
    EXPECT_EQ(private_list.error().code(), Errc::kPermissionDenied);
    const proto::FileWriteRequest private_write_request{
        dir + "/private/x", "nobody", {}, "", "", true};
    auto private_write = co_await client->openWrite(private_write_request);
    CO_ASSERT_FALSE(private_write);
    EXPECT_EQ(private_write.error().code(), Errc::kPermissionDenied);
    // Replacing a file takes the right to write it, not only its directory.
    const proto::FileWriteRequest readonly_request{dir + "/readonly", "nobody", {}, "", "", true};
    auto readonly = co_await client->openWrite(readonly_request);
    CO_ASSERT_FALSE(readonly);
    EXPECT_EQ(readonly.error().code(), Errc::kPermissionDenied);
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
    EXPECT_EQ(given.error().code(), Errc::kPermissionDenied);
    EXPECT_FALSE(fs::exists(dir + "/gift"));
    EXPECT_TRUE(co_await noTempFilesSoon(dir));
    // The worker went back to root after each operation.
    const proto::FileReadRequest root_again_request{dir + "/readonly", ""};
    auto root_again = co_await client->openRead(root_again_request);
    CO_ASSERT_TRUE(root_again);
    const proto::WatchRequest watch_private_request{dir + "/private", "nobody", false};
    auto watch_private = co_await client->watch(watch_private_request);
    CO_ASSERT_FALSE(watch_private);
    EXPECT_EQ(watch_private.error().code(), Errc::kPermissionDenied);
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

// Read, write and watch streams through AgentClient and the real agent (--listen): content
// byte-exact, back-pressure, modes and owners, aborted writes, watch events. The agent works in
// the test's temp directory; what needs root skips without it.
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

}  // namespace
}  // namespace hutch::guest

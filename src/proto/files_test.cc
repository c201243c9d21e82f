#include "proto/files.h"

#include <gtest/gtest.h>

#include <string>

#include "proto/frame.h"
#include "proto/test_samples.h"

namespace hutch::proto {
namespace {

template <class T>
T roundTrip(const T& message) {
  auto decoded = decodeMessage<T>(encodeMessage(message));
  EXPECT_TRUE(decoded) << decoded.error().message();
  return decoded ? *decoded : T{};
}

FileInfo sampleInfo() {
  return testing::regularFile();
}

FileInfo sampleLink() {
  FileInfo link = sampleInfo();
  link.name = "l";
  link.path = "/l";
  link.type = FileType::kSymlink;
  link.mode = 0777;
  link.permissions = "lrwxrwxrwx";
  link.symlink_target = "../a b";
  return link;
}

TEST(FilesMessageTest, FileInfoWireFormatIsTheApiOne) {
  EXPECT_EQ(encodeMessage(sampleInfo()),
            R"({"gid":1000,"group":"hutch","mode":420,"mtime_ns":1764400000123456789,)"
            R"("name":"a.txt","owner":"hutch","path":"/home/hutch/a.txt",)"
            R"("permissions":"-rw-r--r--","size":13,"symlink_target":"","type":"file",)"
            R"("uid":1000})");
}

TEST(FilesMessageTest, RoundTrips) {
  EXPECT_EQ(roundTrip(sampleInfo()), sampleInfo());
  EXPECT_EQ(roundTrip(sampleLink()), sampleLink());
  FileInfo root = sampleInfo();
  root.name = "/";
  root.path = "/";
  root.type = FileType::kDir;
  root.permissions = "drwxr-xr-x";
  EXPECT_EQ(roundTrip(root), root);
  FileInfo other = sampleInfo();
  other.type = FileType::kOther;
  other.mode = 07777;
  other.uid = 4294967295u;
  other.mtime_ns = -5;  // before 1970
  EXPECT_EQ(roundTrip(other), other);

  EXPECT_EQ(roundTrip(FileStatRequest{"a", "hutch", true}), (FileStatRequest{"a", "hutch", true}));
  EXPECT_EQ(roundTrip(FileListRequest{"/x", "", 32, 100000}),
            (FileListRequest{"/x", "", 32, 100000}));
  EXPECT_EQ(roundTrip(FileList{{sampleInfo(), sampleLink()}, true}),
            (FileList{{sampleInfo(), sampleLink()}, true}));
  EXPECT_EQ(roundTrip(FileList{}), FileList{});
  EXPECT_EQ(roundTrip(FileMkdirRequest{"d", "1000", 01777, false}),
            (FileMkdirRequest{"d", "1000", 01777, false}));
  EXPECT_EQ(roundTrip(FileMkdirResult{sampleInfo(), true}), (FileMkdirResult{sampleInfo(), true}));
  EXPECT_EQ(roundTrip(FileMoveRequest{"a", "b", "u", true}),
            (FileMoveRequest{"a", "b", "u", true}));
  EXPECT_EQ(roundTrip(FileRemoveRequest{"a", "u", true}), (FileRemoveRequest{"a", "u", true}));
  EXPECT_EQ(roundTrip(FileReadRequest{"a", "u"}), (FileReadRequest{"a", "u"}));
  FileWriteRequest write{"a", "u", 04755, "www-data", "0", false};
  EXPECT_EQ(roundTrip(write), write);
  FileWriteRequest plain{"a", "", std::nullopt, "", "", true};
  EXPECT_EQ(roundTrip(plain), plain);
  EXPECT_EQ(encodeMessage(plain), R"({"parents":true,"path":"a"})");
  EXPECT_EQ(roundTrip(FileWriteOpened{"/a"}), FileWriteOpened{"/a"});
  EXPECT_EQ(roundTrip(WatchRequest{"/w", "u", true}), (WatchRequest{"/w", "u", true}));
  FileEvents events{{{FileEventType::kCreate, "/w/a"},
                     {FileEventType::kWrite, "/w/a"},
                     {FileEventType::kRemove, "/w/b"},
                     {FileEventType::kRename, "/w/c"},
                     {FileEventType::kChmod, "/w"}},
                    true};
  EXPECT_EQ(roundTrip(events), events);
  EXPECT_EQ(encodeMessage(FileEvents{{{FileEventType::kRename, "/x"}}, false}),
            R"({"events":[{"path":"/x","type":"rename"}]})");
}

TEST(FilesMessageTest, RequestDefaults) {
  auto list = decodeMessage<FileListRequest>(R"({"path":"p","future":1})");
  ASSERT_TRUE(list) << list.error().message();
  EXPECT_EQ(list->depth, 1u);
  EXPECT_EQ(list->max_entries, kDefaultListEntries);
  EXPECT_TRUE(list->user.empty());
  auto mkdir = decodeMessage<FileMkdirRequest>(R"({"path":"p"})");
  ASSERT_TRUE(mkdir);
  EXPECT_EQ(mkdir->mode, 0755u);
  EXPECT_TRUE(mkdir->parents);
  auto move = decodeMessage<FileMoveRequest>(R"({"from":"a","to":"b"})");
  ASSERT_TRUE(move);
  EXPECT_FALSE(move->overwrite);
  auto remove = decodeMessage<FileRemoveRequest>(R"({"path":"a"})");
  ASSERT_TRUE(remove);
  EXPECT_FALSE(remove->recursive);
  auto write = decodeMessage<FileWriteRequest>(R"({"path":"a"})");
  ASSERT_TRUE(write);
  EXPECT_FALSE(write->mode.has_value());
  EXPECT_TRUE(write->parents);
  auto stat = decodeMessage<FileStatRequest>(R"({"path":"a"})");
  ASSERT_TRUE(stat);
  EXPECT_FALSE(stat->follow);
  auto watch = decodeMessage<WatchRequest>(R"({"path":"a"})");
  ASSERT_TRUE(watch);
  EXPECT_FALSE(watch->recursive);
}

TEST(FilesMessageTest, BadValuesAreInvalidArguments) {
  for (const char* bad :
       {R"({"path":""})", R"({"path":"a","depth":0})", R"({"path":"a","depth":33})",
        R"({"path":"a","max_entries":0})", R"({"path":"a","max_entries":100001})",
        R"({"path":"a\u0000b"})", R"({"path":"a","user":"r\u0000"})"}) {
    auto r = decodeMessage<FileListRequest>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument) << bad;
  }
  EXPECT_EQ(decodeMessage<FileMkdirRequest>(R"({"path":"a","mode":4096})").error().code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(decodeMessage<FileWriteRequest>(R"({"path":"a","mode":4096})").error().code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(decodeMessage<FileWriteRequest>(R"({"path":"a","owner":"x\u0000"})").error().code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(decodeMessage<FileMoveRequest>(R"({"from":"","to":"b"})").error().code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(validate(FileReadRequest{std::string(kMaxPathLength + 1, 'a'), ""}).error().code(),
            Errc::kInvalidArgument);
  EXPECT_TRUE(validate(FileReadRequest{std::string(kMaxPathLength, 'a'), ""}));
}

TEST(FilesMessageTest, MalformedRequestsAreProtocolErrors) {
  for (const char* bad : {"", "[]", R"({})", R"({"path":1})", R"({"path":"a","user":2})"}) {
    auto r = decodeMessage<FileListRequest>(bad);
    auto w = decodeMessage<WatchRequest>(bad);
    ASSERT_FALSE(r) << bad;
    ASSERT_FALSE(w) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
    EXPECT_EQ(w.error().code(), Errc::kProtocol) << bad;
  }
  EXPECT_EQ(decodeMessage<FileListRequest>(R"({"path":"a","depth":1.5})").error().code(),
            Errc::kProtocol);
  EXPECT_EQ(decodeMessage<FileListRequest>(R"({"path":"a","depth":"2"})").error().code(),
            Errc::kProtocol);
  EXPECT_EQ(decodeMessage<WatchRequest>(R"({"path":"a","recursive":"yes"})").error().code(),
            Errc::kProtocol);
  EXPECT_EQ(decodeMessage<FileMoveRequest>(R"({"from":"a"})").error().code(), Errc::kProtocol);
  EXPECT_EQ(decodeMessage<FileWriteRequest>(R"({"path":"a","mode":-1})").error().code(),
            Errc::kProtocol);
}

// What a box sends is hostile: every field of a FileInfo is checked.
TEST(FilesMessageTest, BadFileInfosFromTheAgentAreProtocolErrors) {
  const std::string good = encodeMessage(sampleInfo());
  ASSERT_TRUE(decodeMessage<FileInfo>(good));
  auto with = [&](const std::string& key, const std::string& value) {
    std::string json = good;
    const std::string needle = "\"" + key + "\":";
    const size_t at = json.find(needle) + needle.size();
    const size_t end = json.find_first_of(",}", json[at] == '"' ? json.find('"', at + 1) : at);
    return json.substr(0, at) + value + json.substr(end);
  };
  for (const auto& bad : {
           with("type", R"("socket")"),
           with("type", "1"),
           with("path", R"("relative/a")"),
           with("path", R"("")"),
           with("path", R"("/a\u0000b")"),
           with("name", R"("a/b")"),
           with("name", R"("")"),
           with("name", R"("..")"),
           with("size", "-1"),
           with("size", "18446744073709551615"),
           with("size", R"("13")"),
           with("mode", "4096"),
           with("mode", "-1"),
           with("permissions", R"("-rw")"),
           with("uid", "4294967296"),
           with("gid", "-1"),
           with("mtime_ns", "1.5"),
           with("owner", "null"),
           std::string(R"({"name":"a"})"),
           std::string("[]"),
       }) {
    auto r = decodeMessage<FileInfo>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
  for (const char* bad : {R"({"entries":{}})", R"({"entries":[1]})", R"({"truncated":true})",
                          R"({"entries":[],"truncated":1})"}) {
    EXPECT_EQ(decodeMessage<FileList>(bad).error().code(), Errc::kProtocol) << bad;
  }
  EXPECT_EQ(decodeMessage<FileMkdirResult>(R"({"created":true})").error().code(), Errc::kProtocol);
  for (const char* bad :
       {R"({})", R"({"events":[{"type":"moved","path":"/a"}]})",
        R"({"events":[{"type":"create","path":"a"}]})", R"({"events":[{"type":"create"}]})",
        R"({"events":["create"]})", R"({"events":[],"overflow":"no"})"}) {
    EXPECT_EQ(decodeMessage<FileEvents>(bad).error().code(), Errc::kProtocol) << bad;
  }
  EXPECT_EQ(decodeMessage<FileWriteOpened>(R"({"path":"x"})").error().code(), Errc::kProtocol);
}

TEST(FilesMessageTest, ABatchOfLargeEntriesStaysFarBelowTheFrameLimit) {
  // The worst entry: long path, name and link target, all bytes escaped by JSON.
  FileInfo worst = sampleLink();
  worst.path = "/" + std::string(kMaxPathLength - 1, '\x01');
  worst.name = std::string(255, '\x01');
  worst.symlink_target = std::string(kMaxPathLength, '\x01');
  const size_t one = encodeMessage(worst).size();
  EXPECT_LT(kFileBatchBytes + one, kMaxPayload);
}

}  // namespace
}  // namespace hutch::proto

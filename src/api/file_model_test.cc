#include "api/file_model.h"

#include <gtest/gtest.h>

namespace hutch::api {
namespace {

using nlohmann::json;

TEST(FileModel, ModesAreNumbersOrOctalStrings) {
  EXPECT_EQ(parseMode(json(493), "x"), 0755u);
  EXPECT_EQ(parseMode(json("0755"), "x"), 0755u);
  EXPECT_EQ(parseMode(json("755"), "x"), 0755u);
  EXPECT_EQ(parseMode(json("0o700"), "x"), 0700u);
  EXPECT_EQ(parseMode(json("7777"), "x"), 07777u);
  for (const json& bad : {json(-1), json(4096), json(1.5), json("0800"), json("99999"), json(""),
                          json("0x1ff"), json(true), json(nullptr)}) {
    auto mode = parseMode(bad, "a mkdir request");
    ASSERT_FALSE(mode) << bad.dump();
    EXPECT_EQ(mode.error().code(), Errc::kInvalidArgument);
  }
  EXPECT_EQ(parseOctalMode("644", "m"), 0644u);
  EXPECT_FALSE(parseOctalMode("64a", "m"));
  EXPECT_FALSE(parseOctalMode("-1", "m"));
}

TEST(FileModel, Mkdir) {
  auto r = parseMkdir(R"({"path": "/w/a/b", "mode": "0700", "parents": false, "user": "root"})");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->path, "/w/a/b");
  EXPECT_EQ(r->mode, 0700u);
  EXPECT_FALSE(r->parents);
  EXPECT_EQ(r->user, "root");
  auto d = parseMkdir(R"({"path": "rel"})");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, 0755u);
  EXPECT_TRUE(d->parents);
  EXPECT_EQ(d->user, "");
  EXPECT_EQ(parseMkdir(R"({"path": 5})").error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(parseMkdir(R"({})").error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(parseMkdir(R"({"path": "a", "mode": 70000})").error().code(), Errc::kInvalidArgument);
  auto typo = parseMkdir(R"({"path": "a", "parent": true})");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().message().find("'parent'"), std::string::npos);
  EXPECT_FALSE(parseMkdir("{not json"));
  EXPECT_FALSE(parseMkdir("[]"));
}

TEST(FileModel, Move) {
  auto r = parseMove(R"({"from": "a", "to": "/b", "overwrite": true})");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->from, "a");
  EXPECT_EQ(r->to, "/b");
  EXPECT_TRUE(r->overwrite);
  EXPECT_FALSE(parseMove(R"({"from": "a"})"));
  EXPECT_FALSE(parseMove(R"({"from": "a", "to": "b", "overwrite": "yes"})"));
  EXPECT_FALSE(parseMove(R"({"from": "a", "to": "b", "force": true})"));
}

TEST(FileModel, Query) {
  auto q = parseFileQuery({{"path", "/a"}, {"user", "root"}, {"depth", "3"}}, {"depth"});
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(q->path, "/a");
  EXPECT_EQ(q->user, "root");
  EXPECT_EQ(q->depth, 3u);
  EXPECT_FALSE(parseFileQuery({{"path", "/a"}, {"depth", "0"}}, {"depth"}));
  EXPECT_FALSE(parseFileQuery({{"path", "/a"}, {"depth", "33"}}, {"depth"}));
  EXPECT_FALSE(parseFileQuery({{"path", "/a"}, {"depth", "2x"}}, {"depth"}));
  auto unknown = parseFileQuery({{"path", "/a"}, {"depth", "2"}}, {});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message().find("'depth'"), std::string::npos);
  auto missing = parseFileQuery({}, {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("'path' is required"), std::string::npos);
  auto put = parseFileQuery({{"path", "f"}, {"mode", "0600"}, {"owner", "root"}, {"group", "adm"}},
                            {"mode", "owner", "group"});
  ASSERT_TRUE(put);
  EXPECT_EQ(put->mode, 0600u);
  EXPECT_EQ(put->owner, "root");
  EXPECT_EQ(put->group, "adm");
  EXPECT_FALSE(parseFileQuery({{"path", "f"}, {"mode", "rw"}}, {"mode"}));
  EXPECT_TRUE(parseFileQuery({{"path", "d"}, {"recursive", ""}}, {"recursive"})->recursive);
  EXPECT_TRUE(parseFileQuery({{"path", "d"}, {"recursive", "true"}}, {"recursive"})->recursive);
  EXPECT_FALSE(parseFileQuery({{"path", "d"}, {"recursive", "false"}}, {"recursive"})->recursive);
  EXPECT_FALSE(parseFileQuery({{"path", "d"}, {"recursive", "maybe"}}, {"recursive"}));
}

TEST(FileModel, FileInfoJson) {
  proto::FileInfo info{.name = "a.txt",
                       .path = "/home/hutch/a.txt",
                       .type = proto::FileType::kFile,
                       .size = 13,
                       .mode = 0644,
                       .permissions = "-rw-r--r--",
                       .uid = 1000,
                       .gid = 1000,
                       .owner = "hutch",
                       .group = "hutch",
                       .mtime_ns = 5};
  json j = toJson(info);
  EXPECT_EQ(j["type"], "file");
  EXPECT_EQ(j["mode"], 420);
  EXPECT_EQ(j["symlink_target"], "");
  EXPECT_EQ(j.size(), 12u);
  json made = toJson(proto::FileMkdirResult{.entry = info, .created = true});
  EXPECT_EQ(made["created"], true);
  EXPECT_EQ(made["path"], "/home/hutch/a.txt");
}

}  // namespace
}  // namespace hutch::api

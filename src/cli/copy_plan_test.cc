#include "cli/copy_plan.h"

#include <gtest/gtest.h>

namespace hutch::cli {
namespace {

constexpr FileKind kMissing = FileKind::kMissing;
constexpr FileKind kDir = FileKind::kDirectory;
constexpr FileKind kFile = FileKind::kOther;

// Host -> box dev, as in `hutch cp SRC dev:DST`.
Result<CopyPlan> plan(const std::string& src, FileKind src_kind, const std::string& dst,
                      FileKind dst_kind, FileKind parent_kind = kDir) {
  return planCopy({src, src_kind, dst, dst_kind, parent_kind, "", " in box dev"});
}

TEST(ParseCopyEndpointTest, ColonBeforeAnySlashNamesABox) {
  EXPECT_EQ(*parseCopyEndpoint("dev:/tmp/x"), (CopyEndpoint{"dev", "/tmp/x"}));
  EXPECT_EQ(*parseCopyEndpoint("dev:rel/a"), (CopyEndpoint{"dev", "rel/a"}));
  EXPECT_EQ(*parseCopyEndpoint("dev:a:b"), (CopyEndpoint{"dev", "a:b"}));
  EXPECT_EQ(*parseCopyEndpoint("notes.txt"), (CopyEndpoint{"", "notes.txt"}));
  EXPECT_EQ(*parseCopyEndpoint("/a:b"), (CopyEndpoint{"", "/a:b"}));
  EXPECT_EQ(*parseCopyEndpoint("./a:b"), (CopyEndpoint{"", "./a:b"}));
  EXPECT_EQ(*parseCopyEndpoint("a/b:c"), (CopyEndpoint{"", "a/b:c"}));
  EXPECT_EQ(*parseCopyEndpoint(":x"), (CopyEndpoint{"", ":x"}));
}

TEST(ParseCopyEndpointTest, BoxWithoutPathOrEmptyArgumentIsAnError) {
  auto r = parseCopyEndpoint("dev:");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(r.error().message().find("dev:/root"), std::string::npos) << r.error().message();
  EXPECT_FALSE(parseCopyEndpoint(""));
}

TEST(PathHelpersTest, ParentAndBaseIgnoreTrailingSlashes) {
  EXPECT_EQ(parentPath("a"), ".");
  EXPECT_EQ(parentPath("/a"), "/");
  EXPECT_EQ(parentPath("/a/b/"), "/a");
  EXPECT_EQ(parentPath("a//b"), "a");
  EXPECT_EQ(parentPath("/"), "/");
  EXPECT_EQ(parentPath("dir/."), "dir");
  EXPECT_EQ(baseName("/a/b/"), "b");
  EXPECT_EQ(baseName("b"), "b");
  EXPECT_EQ(baseName("/"), "");
  EXPECT_EQ(baseName("dir/."), ".");
  EXPECT_EQ(baseName("."), ".");
}

TEST(PlanCopyTest, FileIntoAnExistingDirectoryKeepsItsName) {
  EXPECT_EQ(*plan("a/f.txt", kFile, "/tmp", kDir), (CopyPlan{"a", "f.txt", "/tmp", "f.txt"}));
  EXPECT_EQ(*plan("f.txt", kFile, "/tmp/", kDir), (CopyPlan{".", "f.txt", "/tmp/", "f.txt"}));
}

TEST(PlanCopyTest, FileToANewOrExistingFileTakesTheDestinationName) {
  EXPECT_EQ(*plan("a/f.txt", kFile, "/tmp/g.txt", kMissing),
            (CopyPlan{"a", "f.txt", "/tmp", "g.txt"}));
  EXPECT_EQ(*plan("a/f.txt", kFile, "/tmp/g.txt", kFile),
            (CopyPlan{"a", "f.txt", "/tmp", "g.txt"}));
  EXPECT_EQ(*plan("f", kFile, "g", kMissing), (CopyPlan{".", "f", ".", "g"}));
}

TEST(PlanCopyTest, DirectoryIntoAnExistingDirectoryLandsInsideIt) {
  EXPECT_EQ(*plan("src/proj", kDir, "/work", kDir), (CopyPlan{"src/proj", ".", "/work", "proj"}));
  // A trailing slash on the source changes nothing (it only follows a symlink to a directory).
  EXPECT_EQ(*plan("src/proj/", kDir, "/work", kDir), (CopyPlan{"src/proj/", ".", "/work", "proj"}));
}

TEST(PlanCopyTest, DirectoryToAMissingPathIsCreatedUnderThatName) {
  EXPECT_EQ(*plan("proj", kDir, "/work/copy", kMissing), (CopyPlan{"proj", ".", "/work", "copy"}));
  EXPECT_EQ(*plan("proj", kDir, "/work/copy/", kMissing), (CopyPlan{"proj", ".", "/work", "copy"}));
  EXPECT_EQ(*plan("proj/.", kDir, "/work/copy", kMissing),
            (CopyPlan{"proj/.", ".", "/work", "copy"}));
}

TEST(PlanCopyTest, TrailingDotCopiesTheContentsIntoAnExistingDirectory) {
  EXPECT_EQ(*plan("proj/.", kDir, "/work", kDir), (CopyPlan{"proj/.", ".", "/work", "."}));
  EXPECT_EQ(*plan(".", kDir, "/work", kDir), (CopyPlan{".", ".", "/work", "."}));
  EXPECT_EQ(*plan("/", kDir, "/work", kDir), (CopyPlan{"/", ".", "/work", "."}));
}

TEST(PlanCopyTest, MissingDestinationDirectoryIsNotFoundAndNamesTheBox) {
  auto r = plan("f.txt", kFile, "/no/such/f.txt", kMissing, kMissing);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kNotFound);
  EXPECT_EQ(r.error().message(), "/no/such: no such directory in box dev");
  // A file to "dir/" needs dir to exist, even when its parent does.
  r = plan("f.txt", kFile, "/tmp/new/", kMissing, kDir);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kNotFound);
  EXPECT_EQ(r.error().message(), "/tmp/new/: no such directory in box dev");
  r = plan("proj", kDir, "/no/such/copy", kMissing, kMissing);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kNotFound);
}

TEST(PlanCopyTest, ParentThatIsAFileIsRefused) {
  auto r = plan("f.txt", kFile, "/etc/hosts/x", kMissing, kFile);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(r.error().message(), "/etc/hosts: not a directory in box dev");
}

TEST(PlanCopyTest, DirectoryOntoAFileIsRefused) {
  auto r = plan("proj", kDir, "/etc/hosts", kFile);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(r.error().message(),
            "Cannot copy the directory proj onto the file /etc/hosts in box dev");
  r = plan("f", kFile, "/etc/hosts/", kFile);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
}

TEST(PlanCopyTest, SourceErrors) {
  auto missing = planCopy({"/x/y", kMissing, "here", kDir, kDir, " in box dev", ""});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kNotFound);
  EXPECT_EQ(missing.error().message(), "/x/y: no such file or directory in box dev");
  auto dot_on_file = plan("f.txt/.", kFile, "/tmp", kDir);
  ASSERT_FALSE(dot_on_file);
  EXPECT_EQ(dot_on_file.error().code(), Errc::kInvalidArgument);
  auto slash_on_file = plan("f.txt/", kFile, "/tmp", kDir);
  ASSERT_FALSE(slash_on_file);
  EXPECT_EQ(slash_on_file.error().code(), Errc::kInvalidArgument);
  auto dotdot = plan("a/..", kDir, "/tmp", kDir);
  ASSERT_FALSE(dotdot);
  EXPECT_EQ(dotdot.error().code(), Errc::kInvalidArgument);
}

TEST(PlanCopyTest, SymlinkSourceIsCopiedAsALink) {
  // lstat says "not a directory" for a link, even one to a directory: the link itself is copied.
  EXPECT_EQ(*plan("/srv/current", kFile, "/tmp", kDir),
            (CopyPlan{"/srv", "current", "/tmp", "current"}));
}

std::optional<std::string> rename(std::string_view entry, const CopyPlan& p) {
  auto r = renameEntry(entry, p);
  EXPECT_TRUE(r) << entry << ": " << r.error().message();
  return r ? *r : std::nullopt;
}

TEST(RenameEntryTest, FileIsRenamed) {
  CopyPlan p{"a", "f.txt", "/tmp", "g.txt"};
  EXPECT_EQ(rename("f.txt", p), "g.txt");
  EXPECT_EQ(rename("./f.txt", p), "g.txt");
}

TEST(RenameEntryTest, DirectoryRootBecomesTheTargetName) {
  CopyPlan p{"proj", ".", "/work", "copy"};
  EXPECT_EQ(rename("./", p), "copy");
  EXPECT_EQ(rename(".", p), "copy");
  EXPECT_EQ(rename("", p), "copy");
  EXPECT_EQ(rename("./a/b/", p), "copy/a/b");
  EXPECT_EQ(rename("a b/c", p), "copy/a b/c");
}

TEST(RenameEntryTest, ContentsIntoAnExistingDirectorySkipTheRoot) {
  CopyPlan p{"proj/.", ".", "/work", "."};
  EXPECT_EQ(rename("./", p), std::nullopt);
  EXPECT_EQ(rename("./a", p), "a");
  EXPECT_EQ(rename("a/b", p), "a/b");
}

TEST(RenameEntryTest, EntriesOutsideTheSourceAreRefused) {
  CopyPlan file{"a", "f.txt", "/tmp", "g.txt"};
  CopyPlan dir{"proj", ".", "/work", "copy"};
  for (auto [entry, p] :
       {std::pair{"other", file}, std::pair{"f.txt.bak", file}, std::pair{"f.txt/../x", file},
        std::pair{"/etc/passwd", dir}, std::pair{"../x", dir}, std::pair{"a/../../x", dir}}) {
    auto r = renameEntry(entry, p);
    ASSERT_FALSE(r) << entry;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << entry;
  }
}

TEST(RemoteStatTest, ParsesTheProbeOutput) {
  auto dir = parseRemoteStat("41ed 1000 1000 41ed 1000 1000");
  ASSERT_TRUE(dir);
  EXPECT_EQ(kindOfMode(dir->lmode), FileKind::kDirectory);
  EXPECT_EQ(kindOfMode(dir->mode), FileKind::kDirectory);
  EXPECT_EQ(dir->uid, 1000u);
  EXPECT_EQ(dir->gid, 1000u);
  auto dangling = parseRemoteStat("a1ff 0 0 - - -");
  ASSERT_TRUE(dangling);
  EXPECT_EQ(kindOfMode(dangling->lmode), FileKind::kOther);
  EXPECT_EQ(kindOfMode(dangling->mode), FileKind::kMissing);
  auto missing = parseRemoteStat("- - - - - -");
  ASSERT_TRUE(missing);
  EXPECT_EQ(kindOfMode(missing->lmode), FileKind::kMissing);
  for (const char* bad : {"", "41ed 0 0", "zz 0 0 41ed 0 0", "41ed 0 0 41ed x 0"}) {
    EXPECT_FALSE(parseRemoteStat(bad)) << bad;
  }
}

}  // namespace
}  // namespace hutch::cli

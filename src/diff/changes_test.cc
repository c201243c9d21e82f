#include "diff/changes.h"

#include <gtest/gtest.h>

namespace hutch::diff {
namespace {

Entry file(std::string path, uint64_t size, uint32_t ino, int64_t mtime = 1) {
  Entry e;
  e.path = std::move(path);
  e.kind = Kind::kFile;
  e.mode = 0644;
  e.size = size;
  e.ino = ino;
  e.mtime_ns = mtime;
  e.ctime_ns = mtime;
  return e;
}

Tree tree(std::vector<Entry> entries) {
  Tree t;
  t.entries = std::move(entries);
  std::sort(t.entries.begin(), t.entries.end(),
            [](const Entry& a, const Entry& b) { return a.path < b.path; });
  return t;
}

SameContent never() {
  return [](const Entry&, const Entry& b) -> Result<bool> {
    ADD_FAILURE() << "compared " << b.path;
    return true;
  };
}

TEST(CompareTest, AddedDeletedAndChangedInPathOrder) {
  Tree before = tree({file("/a", 1, 10), file("/b", 2, 11), file("/c", 3, 12)});
  Entry grown = file("/b", 5, 11, 2);
  Tree after = tree({file("/a", 1, 10), grown, file("/d", 4, 13)});
  auto changes = compare(before, after, never());
  ASSERT_TRUE(changes) << changes.error().describe();
  ASSERT_EQ(changes->size(), 3u);
  EXPECT_EQ((*changes)[0].entry.path, "/b");
  EXPECT_EQ((*changes)[0].change, ChangeKind::kChanged);
  EXPECT_EQ((*changes)[0].what, std::vector<std::string>{"content"});
  EXPECT_EQ((*changes)[0].before->size, 2u);
  EXPECT_EQ((*changes)[1].entry.path, "/c");
  EXPECT_EQ((*changes)[1].change, ChangeKind::kDeleted);
  EXPECT_EQ((*changes)[2].entry.path, "/d");
  EXPECT_EQ((*changes)[2].change, ChangeKind::kAdded);
}

TEST(CompareTest, EqualSizeIsReadAndTimesAloneAreNoChange) {
  Tree before = tree({file("/same", 4, 10, 1), file("/edited", 4, 11, 1)});
  Tree after = tree({file("/same", 4, 10, 9), file("/edited", 4, 11, 9)});
  std::vector<std::string> read;
  auto changes = compare(before, after, [&](const Entry&, const Entry& b) -> Result<bool> {
    read.push_back(b.path);
    return b.path == "/same";
  });
  ASSERT_TRUE(changes);
  EXPECT_EQ(read, (std::vector<std::string>{"/edited", "/same"}));
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].entry.path, "/edited");
}

TEST(CompareTest, ModeOwnerTypeAndTarget) {
  Entry link;
  link.path = "/l";
  link.kind = Kind::kSymlink;
  link.target = "x";
  link.ino = 20;
  Entry relinked = link;
  relinked.target = "y";
  Entry f = file("/f", 1, 10);
  Entry chmodded = f;
  chmodded.mode = 0600;
  chmodded.uid = 1000;
  Entry d = file("/t", 0, 30);
  Entry now_dir = d;
  now_dir.kind = Kind::kDir;
  auto changes = compare(tree({link, f, d}), tree({relinked, chmodded, now_dir}), never());
  ASSERT_TRUE(changes);
  ASSERT_EQ(changes->size(), 3u);
  EXPECT_EQ((*changes)[0].what, (std::vector<std::string>{"mode", "owner"}));
  EXPECT_EQ((*changes)[1].what, std::vector<std::string>{"target"});
  EXPECT_EQ((*changes)[2].what, std::vector<std::string>{"type"});
}

TEST(CompareTest, AReadErrorFailsTheDiff) {
  Tree before = tree({file("/x", 4, 10, 1)});
  Tree after = tree({file("/x", 4, 11, 2)});
  auto changes = compare(before, after, [](const Entry&, const Entry&) -> Result<bool> {
    return fail(Errc::kInvalidArgument, "bad extent");
  });
  ASSERT_FALSE(changes);
  EXPECT_EQ(changes.error().message(), "bad extent");
}

TEST(FilterTest, BuiltInRulesHideHutchsWritesAndCaches) {
  Filter filter(false, {});
  EXPECT_EQ(filter.hiddenBy("/etc/hostname"), "hutch");
  EXPECT_EQ(filter.hiddenBy("/var/lib/apt/lists/partial/x"), "apt");
  EXPECT_EQ(filter.hiddenBy("/var/lib/dpkg/status-old"), "apt");
  EXPECT_EQ(filter.hiddenBy("/home/hutch/app/__pycache__/m.cpython-311.pyc"), "python-caches");
  EXPECT_EQ(filter.hiddenBy("/home/hutch/.cache/pip/x"), "user-caches");
  EXPECT_EQ(filter.hiddenBy("/var/lib/dpkg/status"), std::nullopt);
  EXPECT_EQ(filter.hiddenBy("/etc/hostname.d"), std::nullopt);
  EXPECT_EQ(filter.hiddenBy("/home/hutch/cache"), std::nullopt);
}

TEST(FilterTest, CallersPatternsAnchoredOrByNameAndAllTurnsTheRulesOff) {
  Filter filter(true, {"/home/hutch/build/**", "*.log", "/srv/*/tmp/"});
  EXPECT_EQ(filter.hiddenBy("/etc/hostname"), std::nullopt);
  EXPECT_EQ(filter.hiddenBy("/home/hutch/build"), "ignored");
  EXPECT_EQ(filter.hiddenBy("/home/hutch/build/a/b.o"), "ignored");
  EXPECT_EQ(filter.hiddenBy("/home/hutch/builds"), std::nullopt);
  EXPECT_EQ(filter.hiddenBy("/var/x/app.log"), "ignored");
  EXPECT_EQ(filter.hiddenBy("/srv/one/tmp/file"), "ignored");
  EXPECT_EQ(filter.hiddenBy("/srv/one/two/tmp/file"), std::nullopt);
}

TEST(FilterTest, CountsWhatEachRuleHid) {
  std::vector<Change> changes;
  for (const char* p : {"/etc/hosts", "/etc/hostname", "/home/hutch/a.pyc", "/home/hutch/a.py"}) {
    changes.push_back(Change{ChangeKind::kAdded, file(p, 1, 1), std::nullopt, {}});
  }
  Filtered out = applyFilter(changes, Filter(false, {}));
  ASSERT_EQ(out.changes.size(), 1u);
  EXPECT_EQ(out.changes[0].entry.path, "/home/hutch/a.py");
  EXPECT_EQ(out.hidden, (std::map<std::string, uint64_t>{{"hutch", 2}, {"python-caches", 1}}));
}

TEST(FilterTest, BadPatternsAreRefused) {
  EXPECT_FALSE(validatePattern(""));
  EXPECT_FALSE(validatePattern(std::string("a\0b", 3)));
  EXPECT_FALSE(validatePattern("a\nb"));
  EXPECT_FALSE(validatePattern(std::string(1025, 'a')));
  EXPECT_TRUE(validatePattern("/home/hutch/.cache"));
}

TEST(ChangeJsonTest, ChangedCarriesWhatAndBefore) {
  Entry before = file("/f", 1, 10);
  Entry after = file("/f", 2, 10, 5);
  nlohmann::json j = toJson(Change{ChangeKind::kChanged, after, before, {"content"}});
  EXPECT_EQ(j["path"], "/f");
  EXPECT_EQ(j["change"], "changed");
  EXPECT_EQ(j["type"], "file");
  EXPECT_EQ(j["size"], 2);
  EXPECT_EQ(j["mode"], 0644);
  EXPECT_EQ(j["what"], nlohmann::json::array({"content"}));
  EXPECT_EQ(j["before"]["size"], 1);
}

}  // namespace
}  // namespace hutch::diff

#include "build/build_context.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>

namespace hutch::build {
namespace {

using Type = ContextEntry::Type;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hutch-context-XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    if (dir == nullptr) std::abort();
    path_ = dir;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write(const std::filesystem::path& p, std::string_view data, mode_t mode = 0644) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << data;
  ::chmod(p.c_str(), mode);
}

// A small project: sources, a cache to ignore, links in and out.
void makeProject(const std::filesystem::path& root) {
  write(root / "Dockerfile", "FROM alpine\n");
  write(root / "app" / "main.py", "print('hi')\n");
  write(root / "app" / "run.sh", "#!/bin/sh\n", 0755);
  write(root / "app" / "lib" / "util.py", "x = 1\n");
  write(root / "app" / "__pycache__" / "main.pyc", "bytecode");
  write(root / "README.md", "# readme\n");
  write(root / "notes.log", "log\n");
  std::filesystem::create_directories(root / "empty");
  std::filesystem::create_symlink("app/main.py", root / "entry.py");
  std::filesystem::create_symlink("/etc/passwd", root / "passwd");
  std::filesystem::create_symlink("../../outside", root / "app" / "up");
  ::mkfifo((root / "fifo").c_str(), 0644);
}

std::vector<std::string> paths(const std::vector<ContextEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.path);
  return out;
}

std::vector<ContextEntry> list(const std::filesystem::path& root, std::string_view ignore_text) {
  auto ignore = DockerIgnore::parse(ignore_text);
  EXPECT_TRUE(ignore);
  auto entries = listContext(root, *ignore);
  EXPECT_TRUE(entries) << (entries ? "" : entries.error().message());
  return entries ? *entries : std::vector<ContextEntry>{};
}

TEST(ListContextTest, ListsEverythingButWhatIsIgnored) {
  TempDir tmp;
  makeProject(tmp.path());
  const auto entries = list(tmp.path(), "**/__pycache__\n*.log\n");
  EXPECT_EQ(paths(entries),
            (std::vector<std::string>{"Dockerfile", "README.md", "app", "app/lib",
                                      "app/lib/util.py", "app/main.py", "app/run.sh", "app/up",
                                      "empty", "entry.py", "passwd"}));
  auto find = [&](std::string_view p) -> const ContextEntry& {
    for (const auto& e : entries) {
      if (e.path == p) return e;
    }
    static const ContextEntry none;
    ADD_FAILURE() << p;
    return none;
  };
  EXPECT_EQ(find("app/run.sh").type, Type::kFile);
  EXPECT_EQ(find("app/run.sh").mode, 0755u);
  EXPECT_EQ(find("app/run.sh").size, 10u);
  EXPECT_EQ(find("app").type, Type::kDirectory);
  EXPECT_EQ(find("passwd").type, Type::kSymlink);  // listed, never followed
  EXPECT_EQ(find("passwd").target, "/etc/passwd");
  EXPECT_EQ(find("app/up").target, "../../outside");
  EXPECT_EQ(find("entry.py").target, "app/main.py");
}

TEST(ListContextTest, ExceptionsReachIntoExcludedDirectories) {
  TempDir tmp;
  makeProject(tmp.path());
  EXPECT_EQ(
      paths(list(tmp.path(), "app\n!app/lib/util.py\n")),
      (std::vector<std::string>{"Dockerfile", "README.md", "app", "app/lib", "app/lib/util.py",
                                "empty", "entry.py", "notes.log", "passwd"}));
  EXPECT_EQ(paths(list(tmp.path(), "*\n!Dockerfile\n")), (std::vector<std::string>{"Dockerfile"}));
  EXPECT_TRUE(list(tmp.path(), "**\n").empty());
}

TEST(ListContextTest, Errors) {
  TempDir tmp;
  auto missing = listContext(tmp.path() / "nope", DockerIgnore());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kNotFound);
  EXPECT_EQ(missing.error().message(),
            "The build context " + (tmp.path() / "nope").string() +
                " does not exist: give the directory the build copies files from");
  write(tmp.path() / "file", "x");
  auto file = listContext(tmp.path() / "file", DockerIgnore());
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(file.error().message(),
            "The build context " + (tmp.path() / "file").string() + " is not a directory");
}

TEST(HashSourcesTest, StableAcrossCopiesAndBlindToTimesAndOwners) {
  TempDir a, b;
  makeProject(a.path());
  makeProject(b.path());
  // Different mtimes in the second copy.
  const timeval times[2] = {{1000, 0}, {2000, 0}};
  ::utimes((b.path() / "app" / "main.py").c_str(), times);
  const auto la = list(a.path(), "");
  const auto lb = list(b.path(), "");
  ASSERT_EQ(la, lb);
  auto ha = hashSources(a.path(), la);
  auto hb = hashSources(b.path(), lb);
  ASSERT_TRUE(ha) << ha.error().message();
  ASSERT_TRUE(hb);
  EXPECT_EQ(*ha, *hb);
  EXPECT_TRUE(ha->starts_with("sha256:"));
  EXPECT_EQ(ha->size(), 71u);

  // Contents, modes, link targets and names all count.
  write(b.path() / "app" / "main.py", "print('bye')\n");
  EXPECT_NE(*hashSources(b.path(), list(b.path(), "")), *ha);
  TempDir c;
  makeProject(c.path());
  ::chmod((c.path() / "README.md").c_str(), 0600);
  EXPECT_NE(*hashSources(c.path(), list(c.path(), "")), *ha);
  TempDir d;
  makeProject(d.path());
  std::filesystem::remove(d.path() / "entry.py");
  std::filesystem::create_symlink("app/run.sh", d.path() / "entry.py");
  EXPECT_NE(*hashSources(d.path(), list(d.path(), "")), *ha);
  TempDir e;
  makeProject(e.path());
  std::filesystem::rename(e.path() / "README.md", e.path() / "README.txt");
  EXPECT_NE(*hashSources(e.path(), list(e.path(), "")), *ha);
  // The order given is part of the key; an empty list hashes too.
  auto reversed = la;
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_NE(*hashSources(a.path(), reversed), *ha);
  EXPECT_TRUE(hashSources(a.path(), {}));
}

TEST(HashSourcesTest, RefusesFilesThatChanged) {
  TempDir tmp;
  makeProject(tmp.path());
  const auto entries = list(tmp.path(), "");
  std::filesystem::remove(tmp.path() / "README.md");
  auto gone = hashSources(tmp.path(), entries);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code(), Errc::kFailedPrecondition);
  EXPECT_EQ(gone.error().message(),
            "README.md in the build context " + tmp.path().string() +
                " changed while the build read it (it is gone or became a symlink): run the build "
                "again");
  // A file swapped for a symlink (to something outside) is never read through.
  std::filesystem::create_symlink("/etc/passwd", tmp.path() / "README.md");
  auto swapped = hashSources(tmp.path(), entries);
  ASSERT_FALSE(swapped);
  EXPECT_EQ(swapped.error().code(), Errc::kFailedPrecondition);
  // So is a parent directory swapped for a symlink.
  std::filesystem::remove(tmp.path() / "README.md");
  write(tmp.path() / "README.md", "# readme\n");
  std::filesystem::rename(tmp.path() / "app", tmp.path() / "app.real");
  std::filesystem::create_symlink("app.real", tmp.path() / "app");
  auto parent = hashSources(tmp.path(), entries);
  ASSERT_FALSE(parent);
  EXPECT_EQ(parent.error().code(), Errc::kFailedPrecondition);
}

// ---- resolveCopySources, on listings made by hand ----

ContextEntry file(std::string path, mode_t mode = 0644) {
  return {std::move(path), Type::kFile, mode, 1, ""};
}
ContextEntry dir(std::string path) {
  return {std::move(path), Type::kDirectory, 0755, 0, ""};
}
ContextEntry link(std::string path, std::string target) {
  return {std::move(path), Type::kSymlink, 0777, 0, std::move(target)};
}

const std::vector<ContextEntry> kListing = {
    file("Dockerfile"),
    file("README.md"),
    dir("app"),
    dir("app/lib"),
    file("app/lib/util.py"),
    link("app/lib/up", "../../.."),
    file("app/main.py"),
    file("app/run.sh", 0755),
    dir("app2"),
    file("app2/x.py"),
    link("applink", "app"),
    file("arr[0].txt"),
    link("escape", "../secret"),
    link("absolute", "/etc/passwd"),
    link("loop1", "loop2"),
    link("loop2", "loop1"),
    link("main", "app/main.py"),
    link("dangling", "nope"),
    file("setup.py"),
    file("tools.tar"),
};

CopyPlan plan(const std::vector<std::string>& sources, std::string_view dest,
              const CopyOptions& options = {}) {
  auto out = resolveCopySources(kListing, sources, dest, options);
  EXPECT_TRUE(out) << (out ? "" : out.error().message());
  return out ? *out : CopyPlan{};
}

std::string planError(const std::vector<std::string>& sources, Errc code) {
  auto out = resolveCopySources(kListing, sources, "/dst/");
  EXPECT_FALSE(out);
  if (out) return "";
  EXPECT_EQ(out.error().code(), code) << out.error().message();
  return out.error().message();
}

std::vector<std::pair<std::string, std::string>> targets(const CopyPlan& p) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& item : p.items) out.emplace_back(item.entry.path, item.target);
  return out;
}

TEST(ResolveCopyTest, SingleFile) {
  CopyPlan p = plan({"README.md"}, "/docs/README");
  EXPECT_FALSE(p.dest_is_dir);
  EXPECT_EQ(targets(p), (std::vector<std::pair<std::string, std::string>>{{"README.md", ""}}));
  p = plan({"/README.md"}, "/docs/");
  EXPECT_TRUE(p.dest_is_dir);
  EXPECT_EQ(targets(p),
            (std::vector<std::pair<std::string, std::string>>{{"README.md", "README.md"}}));
  for (std::string dest : {".", "..", "", "x/.", "x/.."}) {
    EXPECT_TRUE(plan({"README.md"}, dest).dest_is_dir) << dest;
  }
  p = plan({"./app/../README.md"}, "/x");
  EXPECT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].source, "README.md");
}

TEST(ResolveCopyTest, SeveralSourcesMakeADirectory) {
  CopyPlan p = plan({"README.md", "setup.py"}, "/src");
  EXPECT_TRUE(p.dest_is_dir);
  EXPECT_EQ(targets(p), (std::vector<std::pair<std::string, std::string>>{
                            {"README.md", "README.md"}, {"setup.py", "setup.py"}}));
  CopyOptions heredoc;
  heredoc.inline_files = 1;
  EXPECT_TRUE(plan({"README.md"}, "/src", heredoc).dest_is_dir);
  // The same file twice is one item.
  EXPECT_EQ(plan({"README.md", "README.md"}, "/d/").items.size(), 1u);
}

TEST(ResolveCopyTest, DirectoryContents) {
  const CopyPlan p = plan({"app/"}, "/srv/app");
  EXPECT_TRUE(p.dest_is_dir);
  EXPECT_EQ(targets(p), (std::vector<std::pair<std::string, std::string>>{
                            {"app/lib", "lib"},
                            {"app/lib/util.py", "lib/util.py"},
                            {"app/lib/up", "lib/up"},  // a symlink inside is copied as one
                            {"app/main.py", "main.py"},
                            {"app/run.sh", "run.sh"}}));
  EXPECT_EQ(p.items[2].entry.type, Type::kSymlink);
  EXPECT_EQ(p.entries().size(), 5u);
  const CopyPlan all = plan({"."}, "/app");
  EXPECT_EQ(all.items.size(), kListing.size());
  EXPECT_EQ(all.items[0].target, "Dockerfile");
  EXPECT_EQ(plan({"/"}, "/app").items.size(), kListing.size());
}

TEST(ResolveCopyTest, Wildcards) {
  CopyPlan p = plan({"*.py"}, "/src/");
  EXPECT_EQ(targets(p),
            (std::vector<std::pair<std::string, std::string>>{{"setup.py", "setup.py"}}));
  p = plan({"*.py"}, "/src/setup.py");  // one match, no slash: the file itself
  EXPECT_FALSE(p.dest_is_dir);
  EXPECT_EQ(targets(p), (std::vector<std::pair<std::string, std::string>>{{"setup.py", ""}}));
  p = plan({"app/*.py", "app?/*"}, "/x");
  EXPECT_TRUE(p.dest_is_dir);
  EXPECT_EQ(targets(p), (std::vector<std::pair<std::string, std::string>>{
                            {"app/main.py", "main.py"}, {"app2/x.py", "x.py"}}));
  p = plan({"R*"}, "/x");
  EXPECT_FALSE(p.dest_is_dir);
  EXPECT_TRUE(plan({"*.nothing"}, "/x/").items.empty());  // no match is fine, as in BuildKit
  p = plan({"arr[[]0].txt"}, "/x/");
  EXPECT_EQ(targets(p),
            (std::vector<std::pair<std::string, std::string>>{{"arr[0].txt", "arr[0].txt"}}));
  // A matched directory copies its contents.
  p = plan({"app[2]"}, "/x/");
  EXPECT_EQ(targets(p), (std::vector<std::pair<std::string, std::string>>{{"app2/x.py", "x.py"}}));
  EXPECT_EQ(planError({"src/[a-"}, Errc::kInvalidArgument),
            "COPY source 'src/[a-': Bad pattern 'src/[a-': a range in a character class has no "
            "end");
}

TEST(ResolveCopyTest, SymlinksAreFollowedInsideOnly) {
  CopyPlan p = plan({"main"}, "/x/");
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].entry.path, "app/main.py");  // the file it leads to
  EXPECT_EQ(p.items[0].source, "main");
  EXPECT_EQ(p.items[0].target, "main");  // named after the source, as Docker does
  p = plan({"applink"}, "/x/");
  EXPECT_EQ(p.items.size(), 5u);
  EXPECT_EQ(p.items[0].target, "lib");
  p = plan({"applink/run.sh"}, "/x");
  EXPECT_EQ(p.items[0].entry.mode, 0755u);
  EXPECT_EQ(planError({"escape"}, Errc::kInvalidArgument),
            "COPY source 'escape' goes through the symlink 'escape', which points outside the "
            "build context: replace it with a relative link inside it, or copy what it points to");
  EXPECT_EQ(planError({"absolute"}, Errc::kInvalidArgument),
            "COPY source 'absolute' goes through the symlink 'absolute', which points outside the "
            "build context: replace it with a relative link inside it, or copy what it points to");
  EXPECT_EQ(planError({"app/lib/up/x"}, Errc::kInvalidArgument),
            "COPY source 'app/lib/up/x' goes through the symlink 'app/lib/up', which points "
            "outside the build context: replace it with a relative link inside it, or copy what it "
            "points to");
  EXPECT_EQ(planError({"loop1"}, Errc::kInvalidArgument),
            "COPY source 'loop1' goes through more than 40 symlinks (a loop?)");
  EXPECT_EQ(planError({"dangling"}, Errc::kNotFound),
            "COPY source 'dangling' leads to 'nope', which is not in the build context: check "
            "the path and its symlinks and that .dockerignore does not leave it out");
  EXPECT_EQ(planError({"e*"}, Errc::kInvalidArgument).substr(0, 40),
            "COPY source 'escape' goes through the sy");
}

TEST(ResolveCopyTest, Errors) {
  EXPECT_EQ(planError({"nope.txt"}, Errc::kNotFound),
            "COPY source 'nope.txt' is not in the build context: check the path (relative to the "
            "context directory) and that .dockerignore does not leave it out");
  CopyOptions stage;
  stage.origin = "stage 'build'";
  auto from_stage = resolveCopySources(kListing, {"/usr/bin/tool"}, "/bin/", stage);
  ASSERT_FALSE(from_stage);
  EXPECT_EQ(from_stage.error().message(),
            "COPY source 'usr/bin/tool' is not in stage 'build': check the path");
  auto climb = resolveCopySources(kListing, {"../x"}, "/bin/", stage);
  ASSERT_FALSE(climb);
  EXPECT_EQ(climb.error().message(),
            "COPY source '../x' is outside stage 'build': sources are paths inside it, and '..' "
            "cannot climb out");
  EXPECT_EQ(planError({"../secret"}, Errc::kInvalidArgument),
            "COPY source '../secret' is outside the build context: sources are paths inside it, "
            "and '..' cannot climb out");
  EXPECT_EQ(planError({"app/../../x"}, Errc::kInvalidArgument),
            "COPY source 'app/../../x' is outside the build context: sources are paths inside it, "
            "and '..' cannot climb out");
  EXPECT_EQ(planError({"README.md/x"}, Errc::kNotFound),
            "COPY source 'README.md/x' is not in the build context: check the path (relative to "
            "the context directory) and that .dockerignore does not leave it out");
  EXPECT_EQ(planError({"https://example.com/x"}, Errc::kUnsupported),
            "'https://example.com/x' is a URL or Git source, which hutch builds do not download: "
            "download it in a RUN step (curl, wget or git clone)");
}

TEST(ResolveCopyTest, AddArchiveCandidates) {
  CopyOptions add;
  add.is_add = true;
  CopyPlan p = plan({"tools.tar", "app"}, "/opt/", add);
  ASSERT_EQ(p.items.size(), 6u);
  EXPECT_TRUE(p.items[0].archive_candidate);  // named directly
  for (size_t i = 1; i < p.items.size(); ++i) EXPECT_FALSE(p.items[i].archive_candidate);
  add.unpack = false;
  EXPECT_FALSE(plan({"tools.tar"}, "/opt/", add).items[0].archive_candidate);
  EXPECT_FALSE(plan({"tools.tar"}, "/opt/").items[0].archive_candidate);  // COPY never unpacks
}

// ---- the whole path: list, resolve, hash, detect archives ----

std::string tarOf(const std::vector<std::pair<std::string, std::string>>& files,
                  int filter = ARCHIVE_FILTER_NONE) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (filter == ARCHIVE_FILTER_GZIP) archive_write_add_filter_gzip(a);
  if (filter == ARCHIVE_FILTER_XZ) archive_write_add_filter_xz(a);
  if (filter == ARCHIVE_FILTER_BZIP2) archive_write_add_filter_bzip2(a);
  std::string out;
  out.resize(1 << 20);
  size_t used = 0;
  archive_write_open_memory(a, out.data(), out.size(), &used);
  for (const auto& [name, data] : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  out.resize(used);
  return out;
}

TEST(DetectArchivesTest, ByContentsNotNames) {
  TempDir tmp;
  const std::string tar = tarOf({{"bin/tool", "#!/bin/sh\n"}});
  write(tmp.path() / "plain.tar", tar);
  write(tmp.path() / "gz.tgz", tarOf({{"a", "b"}}, ARCHIVE_FILTER_GZIP));
  write(tmp.path() / "xz.data", tarOf({{"a", "b"}}, ARCHIVE_FILTER_XZ));
  write(tmp.path() / "bz.tar.bz2", tarOf({{"a", "b"}}, ARCHIVE_FILTER_BZIP2));
  write(tmp.path() / "fake.tar.gz", "not an archive at all");
  write(tmp.path() / "empty.tar", "");
  write(tmp.path() / "zeros.tar", std::string(1024, '\0'));
  write(tmp.path() / "dir" / "inner.tar", tar);
  const auto listing = list(tmp.path(), "");
  CopyOptions add;
  add.is_add = true;
  auto p = resolveCopySources(listing,
                              {"plain.tar", "gz.tgz", "xz.data", "bz.tar.bz2", "fake.tar.gz",
                               "empty.tar", "zeros.tar", "dir"},
                              "/opt/", add);
  ASSERT_TRUE(p) << p.error().message();
  ASSERT_TRUE(detectArchives(tmp.path(), *p));
  std::vector<std::pair<std::string, bool>> got;
  for (const auto& item : p->items) got.emplace_back(item.entry.path, item.extract);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, bool>>{{"plain.tar", true},
                                                            {"gz.tgz", true},
                                                            {"xz.data", true},
                                                            {"bz.tar.bz2", true},
                                                            {"fake.tar.gz", false},
                                                            {"empty.tar", false},
                                                            {"zeros.tar", false},
                                                            {"dir/inner.tar", false}}));
  // Hash the selection: the cache key of this ADD.
  auto key = hashSources(tmp.path(), p->entries());
  ASSERT_TRUE(key) << key.error().message();
  write(tmp.path() / "dir" / "inner.tar", tar + "x");
  EXPECT_NE(*hashSources(tmp.path(), p->entries()), *key);
}

TEST(ContextTest, IgnoredFilesCannotBeCopied) {
  TempDir tmp;
  makeProject(tmp.path());
  const auto listing = list(tmp.path(), "*.log\napp/lib\n");
  auto p = resolveCopySources(listing, {"notes.log"}, "/x/");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code(), Errc::kNotFound);
  auto inside = resolveCopySources(listing, {"app"}, "/x/");
  ASSERT_TRUE(inside);
  for (const auto& item : inside->items)
    EXPECT_FALSE(item.target.starts_with("lib")) << item.target;
  auto through = resolveCopySources(listing, {"entry.py"}, "/x/");
  ASSERT_TRUE(through);
  EXPECT_EQ(through->items[0].entry.path, "app/main.py");
}

}  // namespace
}  // namespace hutch::build

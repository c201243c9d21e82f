#include "build/dockerignore.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace hutch::build {
namespace {

DockerIgnore parse(std::string_view text) {
  auto ignore = DockerIgnore::parse(text);
  EXPECT_TRUE(ignore) << (ignore ? "" : ignore.error().message());
  return ignore ? std::move(*ignore) : DockerIgnore();
}

std::vector<std::string> texts(const DockerIgnore& ignore) {
  std::vector<std::string> out;
  for (const auto& p : ignore.patterns()) out.push_back((p.exception ? "!" : "") + p.text);
  return out;
}

TEST(CleanPathTest, LikeGoFilepathClean) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "."},
      {".", "."},
      {"/", "/"},
      {"//", "/"},
      {"a/", "a"},
      {"a//b/./c/", "a/b/c"},
      {"./x", "x"},
      {"x/../y", "y"},
      {"a/..", "."},
      {"../a", "../a"},
      {"/../a", "/a"},
      {"a/b/../../..", ".."},
      {"../../x/..", "../.."},
      {"/a/b/../c", "/a/c"},
      {"abc/def/../../../ghi", "../ghi"},
  };
  for (const auto& [in, out] : cases) EXPECT_EQ(cleanPath(in), out) << in;
}

TEST(DockerIgnoreTest, ReadsLikeDocker) {
  const DockerIgnore ignore = parse(
      "\xEF\xBB\xBF# a comment\n"
      "\n"
      "node_modules\n"
      "/build/\n"
      "  spaced  \r\n"
      " # not a comment: it does not start the line\n"
      "a//b/./c/\n"
      "x/../y\n"
      "!  keep.txt\n"
      "!/dist/keep\n"
      "../outside\n"
      "/\n");
  EXPECT_EQ(texts(ignore),
            (std::vector<std::string>{"node_modules", "build", "spaced",
                                      "# not a comment: it does not start the line", "a/b/c", "y",
                                      "!keep.txt", "!dist/keep", "../outside", "/"}));
  EXPECT_TRUE(ignore.hasExceptions());
  EXPECT_EQ(ignore.patterns()[2].line, 5);
  EXPECT_FALSE(parse("a\n").hasExceptions());
  EXPECT_TRUE(parse("").empty());
}

TEST(DockerIgnoreTest, RefusesBadPatterns) {
  auto bang = DockerIgnore::parse("a\n! \n");
  ASSERT_FALSE(bang);
  EXPECT_EQ(bang.error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(bang.error().message(),
            ".dockerignore line 2: '!' needs a pattern after it (!keep.txt includes keep.txt "
            "again)");
  auto bad = DockerIgnore::parse("ok\n\nsrc/[a-\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            ".dockerignore line 3: Bad pattern 'src/[a-': a range in a character class has no "
            "end");
  auto big = DockerIgnore::parse(std::string(kMaxDockerignoreBytes + 1, 'a'));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().message(),
            ".dockerignore is 1048577 bytes, more than the 1048576 a build "
            "accepts");
  std::string many;
  for (size_t i = 0; i <= kMaxDockerignorePatterns; ++i) many += "p" + std::to_string(i) + "\n";
  auto too_many = DockerIgnore::parse(many);
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().message(),
            ".dockerignore has more than 10000 patterns; use "
            "wildcards");
  auto long_line = DockerIgnore::parse("a\n" + std::string(70000, 'x') + "\n");
  ASSERT_FALSE(long_line);
  EXPECT_EQ(long_line.error().message(), ".dockerignore line 2 is longer than 65536 bytes");
}

TEST(DockerIgnoreTest, Matching) {
  const DockerIgnore ignore = parse(
      "node_modules\n"
      "*.log\n"
      "!important.log\n"
      "**/*.tmp\n"
      "build/**\n"
      "docs\n"
      "!docs/README.md\n"
      "*/cache*\n"
      "temp?\n"
      "[a-c].txt\n"
      "\\*literal\n");
  const std::vector<std::pair<std::string, bool>> cases = {
      {"node_modules", true},
      {"node_modules/a/b.js", true},
      {"src/node_modules", false},  // "node_modules" is anchored at the root
      {"debug.log", true},
      {"logs/debug.log", false},  // '*' does not cross '/'
      {"important.log", false},   // included again
      {"x.tmp", true},
      {"a/b/c.tmp", true},
      {"build", false},  // "build/**" matches what is inside, not the directory
      {"build/out/x", true},
      {"docs", true},
      {"docs/guide.md", true},
      {"docs/README.md", false},
      {"src/cache", true},
      {"src/cache-v2/x", true},
      {"src/sub/cache", false},
      {"temp1", true},
      {"temp12", false},
      {"b.txt", true},
      {"d.txt", false},
      {"*literal", true},
      {"xliteral", false},
      {"main.go", false},
  };
  for (const auto& [path, excluded] : cases) {
    EXPECT_EQ(ignore.excludes(path), excluded) << path;
  }
}

TEST(DockerIgnoreTest, LastMatchWins) {
  EXPECT_TRUE(parse("!a.log\n*.log\n").excludes("a.log"));
  EXPECT_FALSE(parse("*.log\n!a.log\n").excludes("a.log"));
  EXPECT_TRUE(parse("*\n!src\nsrc/secret\n").excludes("src/secret/key"));
  EXPECT_FALSE(parse("*\n!src\nsrc/secret\n").excludes("src/main.c"));
  EXPECT_TRUE(parse("*\n!src\nsrc/secret\n").excludes("README"));
  // An exception for a file inside an excluded directory includes it; the rest stays excluded.
  const DockerIgnore dir = parse("dir\n!dir/keep\n");
  EXPECT_FALSE(dir.excludes("dir/keep"));
  EXPECT_FALSE(dir.excludes("dir/keep/inner"));
  EXPECT_TRUE(dir.excludes("dir/other"));
  EXPECT_TRUE(dir.excludes("dir"));
  // "**" alone excludes everything; exceptions still work.
  const DockerIgnore all = parse("**\n!Dockerfile\n");
  EXPECT_TRUE(all.excludes("a/b/c"));
  EXPECT_FALSE(all.excludes("Dockerfile"));
  // A pattern that climbs out matches nothing.
  EXPECT_FALSE(parse("../x\n").excludes("x"));
}

TEST(DockerIgnoreTest, IncrementalMatchingAgreesWithWholePaths) {
  const DockerIgnore ignore = parse("a\n!a/b\na/b/c*\n**/*.o\n");
  const std::vector<std::string> paths = {"a", "a/b", "a/b/c1", "a/b/d", "a/x", "z", "z/y.o"};
  for (const std::string& path : paths) {
    DockerIgnore::MatchState state;
    size_t slash = path.find('/');
    while (slash != std::string::npos) {
      DockerIgnore::MatchState next;
      ignore.excludes(path.substr(0, slash), state, &next);
      state = next;
      slash = path.find('/', slash + 1);
    }
    EXPECT_EQ(ignore.excludes(path, state, nullptr), ignore.excludes(path)) << path;
  }
  EXPECT_TRUE(ignore.excludes("a/b/c1"));
  EXPECT_FALSE(ignore.excludes("a/b/d"));
  EXPECT_TRUE(ignore.excludes("z/y.o"));
}

TEST(DockerIgnoreTest, Loads) {
  char tmpl[] = "/tmp/hutch-ignore-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = tmpl;
  auto missing = DockerIgnore::load(dir);
  ASSERT_TRUE(missing);
  EXPECT_TRUE(missing->empty());
  std::ofstream(dir / ".dockerignore") << "*.pyc\n!keep.pyc\n";
  auto loaded = DockerIgnore::load(dir);
  ASSERT_TRUE(loaded) << loaded.error().message();
  EXPECT_EQ(texts(*loaded), (std::vector<std::string>{"*.pyc", "!keep.pyc"}));
  std::filesystem::remove(dir / ".dockerignore");
  std::filesystem::create_directory(dir / ".dockerignore");
  auto not_file = DockerIgnore::load(dir);
  ASSERT_FALSE(not_file);
  EXPECT_EQ(not_file.error().message(),
            (dir / ".dockerignore").string() + " is not a regular file: make it one, or remove it");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hutch::build

#include "build/glob.h"

#include <gtest/gtest.h>

namespace hutch::build {
namespace {

struct Case {
  std::string pattern;
  std::string name;
  bool match;
};

bool match(std::string_view pattern, std::string_view name, Glob::Syntax syntax) {
  auto glob = Glob::compile(pattern, syntax);
  EXPECT_TRUE(glob) << pattern << ": " << glob.error().message();
  return glob && glob->matches(name);
}

// Go's filepath.Match behaviour (Unix), case by case.
TEST(GlobTest, FilepathMatchLikeGo) {
  const std::vector<Case> cases = {
      {"abc", "abc", true},
      {"*", "abc", true},
      {"*c", "abc", true},
      {"a*", "a", true},
      {"a*", "abc", true},
      {"a*", "ab/c", false},
      {"a*/b", "abc/b", true},
      {"a*/b", "a/c/b", false},
      {"a*b*c*d*e*/f", "axbxcxdxe/f", true},
      {"a*b*c*d*e*/f", "axbxcxdxexxx/f", true},
      {"a*b*c*d*e*/f", "axbxcxdxe/xxx/f", false},
      {"a*b*c*d*e*/f", "axbxcxdxexxx/fff", false},
      {"a*b?c*x", "abxbbxdbxebxczzx", true},
      {"a*b?c*x", "abxbbxdbxebxczzy", false},
      {"ab[c]", "abc", true},
      {"ab[b-d]", "abc", true},
      {"ab[e-g]", "abc", false},
      {"ab[^c]", "abc", false},
      {"ab[^b-d]", "abc", false},
      {"ab[^e-g]", "abc", true},
      {"a\\*b", "a*b", true},
      {"a\\*b", "ab", false},
      {"a?b", "a\u263ab", true},
      {"a[^a]b", "a\u263ab", true},
      {"a???b", "a\u263ab", false},
      {"a[^a][^a][^a]b", "a\u263ab", false},
      {"[a-\u03b6]*", "\u03b1", true},
      {"*[a-\u03b6]", "A", false},
      {"a?b", "a/b", false},
      {"a*b", "a/b", false},
      {"[\\]a]", "]", true},
      {"[\\-]", "-", true},
      {"[x\\-]", "x", true},
      {"[x\\-]", "-", true},
      {"[x\\-]", "z", false},
      {"[\\-x]", "x", true},
      {"[\\-x]", "-", true},
      {"[\\-x]", "a", false},
      {"*x", "xxx", true},
      {"a[/]b", "a/b", true},  // a class may match the separator, as in Go
      {"arr[[]0].txt", "arr[0].txt", true},
      {"*.py", ".hidden.py", true},
      {"", "", true},
      {"", "a", false},
      {"?", "\xff", true},  // an undecodable byte is one character
      {"\xff", "\xff", true},
      {"[^a]", "\xff", true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(match(c.pattern, c.name, Glob::Syntax::kFilepath), c.match)
        << c.pattern << " vs " << c.name;
  }
}

TEST(GlobTest, RefusesMalformedPatternsEvenWhenTheyCouldNotMatch) {
  for (std::string bad : {"[]a]", "[-]", "[x-]", "[-x]", "\\", "[a-b-c]", "[", "[^", "[^bc", "a[",
                          "a/b[", "*[", "ab[c", "[\\", "[a-\\", "x\\"}) {
    auto glob = Glob::compile(bad, Glob::Syntax::kFilepath);
    ASSERT_FALSE(glob) << bad;
    EXPECT_EQ(glob.error().code(), Errc::kInvalidArgument);
    EXPECT_TRUE(glob.error().message().starts_with("Bad pattern '" + bad + "': "))
        << glob.error().message();
  }
  auto glob = Glob::compile("[", Glob::Syntax::kFilepath);
  EXPECT_EQ(glob.error().message(),
            "Bad pattern '[': a character class ('[...]') is empty, unclosed or has a stray '-' "
            "or ']' (escape them with '\\')");
  glob = Glob::compile("x\\", Glob::Syntax::kFilepath);
  EXPECT_EQ(glob.error().message(), "Bad pattern 'x\\': it ends with '\\' (escape it as '\\\\')");
  glob = Glob::compile("[a-", Glob::Syntax::kFilepath);
  EXPECT_EQ(glob.error().message(), "Bad pattern '[a-': a range in a character class has no end");
}

TEST(GlobTest, DockerignoreDoubleStar) {
  const std::vector<Case> cases = {
      {"**/foo", "foo", true},
      {"**/foo", "a/b/foo", true},
      {"**/foo", "a/b/foo/c", false},
      {"**/foo", "afoo", false},
      {"foo/**", "foo/x", true},
      {"foo/**", "foo/x/y", true},
      {"foo/**", "foo", false},
      {"**", "anything/at/all", true},
      {"a/**/b", "a/b", true},
      {"a/**/b", "a/x/b", true},
      {"a/**/b", "a/x/y/b", true},
      {"a/**/b", "a/xb", false},
      {"a**b", "ab", true},  // patternmatcher: "**" not before '/' still means (.*/)?
      {"a**b", "ax/b", true},
      {"a**b", "axb", false},
      {"**/*.go", "main.go", true},
      {"**/*.go", "cmd/x/main.go", true},
      {"**/*.go", "main.gox", false},
      {"**.txt", "a/b.txt", true},  // the suffix quirk
      {"**.txt", "b.txt", true},
      {"**foo", "barfoo", true},
      {"*.go", "main.go", true},
      {"*.go", "a/main.go", false},
      {"*/temp*", "a/temp1", true},
      {"*/temp*", "a/b/temp1", false},
      {"foo/**/*.md", "foo/a/b/x.md", true},
      {"foo/**/*.md", "foo/x.md", true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(match(c.pattern, c.name, Glob::Syntax::kDockerignore), c.match)
        << c.pattern << " vs " << c.name;
  }
}

TEST(GlobTest, ShellParamPatterns) {
  auto glob = Glob::compile("f*b", Glob::Syntax::kShellParam);
  ASSERT_TRUE(glob);
  EXPECT_EQ(glob->prefixMatches("foobarbaz"), (std::vector<size_t>{4, 7}));
  EXPECT_TRUE(glob->suffixMatches("foobarbaz").empty());
  auto b = Glob::compile("b*", Glob::Syntax::kShellParam);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->suffixMatches("foobarbaz"), (std::vector<size_t>{3, 6}));
  // '*' and '?' cross '/' but not a newline.
  auto star = Glob::compile("a*c", Glob::Syntax::kShellParam);
  EXPECT_TRUE(star->matches("a/b/c"));
  EXPECT_FALSE(star->matches("a\nc"));
  EXPECT_TRUE(Glob::compile("a\\*", Glob::Syntax::kShellParam)->matches("a*"));
  EXPECT_FALSE(Glob::compile("a\\*", Glob::Syntax::kShellParam)->matches("ab"));
  EXPECT_TRUE(Glob::compile("a\\}", Glob::Syntax::kShellParam)->matches("a}"));
  EXPECT_TRUE(Glob::compile("[x]", Glob::Syntax::kShellParam)->matches("[x]"));
  auto bad = Glob::compile("a\\b", Glob::Syntax::kShellParam);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "Bad pattern 'a\\b': '\\' may only escape '*', '?' or '\\'");
  // Multi-byte characters count as one.
  auto any = Glob::compile("?", Glob::Syntax::kShellParam);
  EXPECT_EQ(any->prefixMatches("\u03b1\u03b2"), (std::vector<size_t>{2}));
  EXPECT_EQ(any->suffixMatches("\u03b1\u03b2"), (std::vector<size_t>{2}));
}

TEST(GlobTest, LiteralsAndWildcardDetection) {
  auto lit = Glob::compile("a\\*b", Glob::Syntax::kFilepath);
  ASSERT_TRUE(lit);
  EXPECT_TRUE(lit->isLiteral());
  EXPECT_EQ(lit->literal(), "a*b");
  EXPECT_FALSE(Glob::compile("a*", Glob::Syntax::kFilepath)->isLiteral());
  EXPECT_TRUE(Glob::hasWildcards("*.py"));
  EXPECT_TRUE(Glob::hasWildcards("a?"));
  EXPECT_TRUE(Glob::hasWildcards("arr[0]"));
  EXPECT_FALSE(Glob::hasWildcards("a\\*b"));
  EXPECT_FALSE(Glob::hasWildcards("src/main.py"));
  EXPECT_FALSE(Glob::hasWildcards("]"));
}

TEST(GlobTest, DecodesLikeGo) {
  std::vector<size_t> offsets;
  const std::u32string runes = decodeRunes("a\u00e9\xff\xe2\x82", &offsets);
  ASSERT_EQ(runes.size(), 5u);
  EXPECT_EQ(runes[0], U'a');
  EXPECT_EQ(runes[1], U'\u00e9');
  EXPECT_EQ(runes[2], 0x110000u + 0xff);
  EXPECT_EQ(runes[3], 0x110000u + 0xe2);  // a truncated sequence: byte by byte
  EXPECT_EQ(runes[4], 0x110000u + 0x82);
  EXPECT_EQ(offsets, (std::vector<size_t>{0, 1, 3, 4, 5, 6}));
  // Overlong forms and surrogates are not valid UTF-8.
  EXPECT_EQ(decodeRunes("\xc0\x80").size(), 2u);
  EXPECT_EQ(decodeRunes("\xed\xa0\x80").size(), 3u);
  EXPECT_EQ(decodeRunes("\xf0\x9f\x98\x80").size(), 1u);
}

TEST(GlobTest, HostilePatternsStayLinear) {
  // Backtracking matchers take exponential time on these; the automaton does not.
  std::string pattern;
  for (int i = 0; i < 200; ++i) pattern += "*a";
  pattern += "b";
  const std::string name(5000, 'a');
  auto glob = Glob::compile(pattern, Glob::Syntax::kFilepath);
  ASSERT_TRUE(glob);
  EXPECT_FALSE(glob->matches(name));
  auto ignore = Glob::compile("**/**/**/**/**/**/x", Glob::Syntax::kDockerignore);
  ASSERT_TRUE(ignore);
  std::string deep;
  for (int i = 0; i < 500; ++i) deep += "d/";
  EXPECT_TRUE(ignore->matches(deep + "x"));
  EXPECT_FALSE(ignore->matches(deep + "y"));
}

}  // namespace
}  // namespace hutch::build

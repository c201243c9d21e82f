#include "build/word_expansion.h"

#include <gtest/gtest.h>

#include <map>

namespace hutch::build {
namespace {

const std::map<std::string, std::string, std::less<>> kEnv = {
    {"PWD", "/home"},  {"SHELL", "bash"},   {"KOREAN", "\ud55c\uad6d\uc5b4"},
    {"EMPTY", ""},     {"V", "foobarbaz"},  {"SPACED", "x  y"},
    {"DOTS", "1.2.3"}, {"PATHV", "/a/b/c"},
};

std::optional<std::string> lookup(std::string_view name) {
  auto it = kEnv.find(name);
  if (it == kEnv.end()) return std::nullopt;
  return it->second;
}

std::string expand(std::string_view word, char escape = '\\') {
  auto out = expandWord(word, lookup, escape);
  EXPECT_TRUE(out) << word << ": " << (out ? "" : out.error().message());
  return out ? *out : "<error>";
}

std::string expandError(std::string_view word) {
  auto out = expandWord(word, lookup);
  EXPECT_FALSE(out) << word << " expanded to " << (out ? *out : "");
  if (out) return "";
  EXPECT_EQ(out.error().code(), Errc::kInvalidArgument);
  return out.error().message();
}

std::vector<std::string> words(std::string_view word) {
  auto out = expandWords(word, lookup);
  EXPECT_TRUE(out) << word << ": " << (out ? "" : out.error().message());
  return out ? *out : std::vector<std::string>{"<error>"};
}

TEST(WordExpansionTest, QuotesAndEscapes) {
  EXPECT_EQ(expand("hello"), "hello");
  EXPECT_EQ(expand("he'll'o"), "hello");
  EXPECT_EQ(expand("he\"ll\"o"), "hello");
  EXPECT_EQ(expand("he\\'llo"), "he'llo");
  EXPECT_EQ(expand("abc\\def"), "abcdef");
  EXPECT_EQ(expand("\"abc\\def\""), "abc\\def");  // in double quotes only " $ \ are escaped
  EXPECT_EQ(expand("\"abc\\\"def\""), "abc\"def");
  EXPECT_EQ(expand("\"a\\\\b\""), "a\\b");
  EXPECT_EQ(expand("'abc\\def'"), "abc\\def");
  EXPECT_EQ(expand("'a \"b\" c'"), "a \"b\" c");
  EXPECT_EQ(expand("\"a 'b' c\""), "a 'b' c");
  EXPECT_EQ(expand("a b  c"), "a b  c");  // one word: spaces kept
  EXPECT_EQ(expand("trailing\\"), "trailing");
  EXPECT_EQ(expand(""), "");
  EXPECT_EQ(expand("\"\""), "");
  EXPECT_EQ(expand("a<b"), "a<b");
  EXPECT_EQ(expand("<<EOF"), "<<EOF");
}

TEST(WordExpansionTest, Variables) {
  EXPECT_EQ(expand("$PWD"), "/home");
  EXPECT_EQ(expand("${PWD}"), "/home");
  EXPECT_EQ(expand("${PWD}x"), "/homex");
  EXPECT_EQ(expand("$PWDx"), "");  // PWDx is unset
  EXPECT_EQ(expand("$PWD/x"), "/home/x");
  EXPECT_EQ(expand("\\$PWD"), "$PWD");
  EXPECT_EQ(expand("\\${PWD}"), "${PWD}");
  EXPECT_EQ(expand("'$PWD'"), "$PWD");
  EXPECT_EQ(expand("\"$PWD\""), "/home");
  EXPECT_EQ(expand("\"\\$PWD\""), "$PWD");
  EXPECT_EQ(expand("\"${KOREAN}!\""), "\ud55c\uad6d\uc5b4!");
  EXPECT_EQ(expand("$"), "$");
  EXPECT_EQ(expand("a$"), "a$");
  EXPECT_EQ(expand("$ x"), "$ x");
  EXPECT_EQ(expand("$1"), "");
  EXPECT_EQ(expand("$$"), "");
  EXPECT_EQ(expand("$-x"), "x");
  EXPECT_EQ(expand("${NOPE}"), "");
  EXPECT_EQ(expand("x${EMPTY}y"), "xy");
}

TEST(WordExpansionTest, Modifiers) {
  EXPECT_EQ(expand("${NOPE:-default}"), "default");
  EXPECT_EQ(expand("${EMPTY:-default}"), "default");
  EXPECT_EQ(expand("${PWD:-default}"), "/home");
  EXPECT_EQ(expand("${NOPE-default}"), "default");
  EXPECT_EQ(expand("${EMPTY-default}"), "");
  EXPECT_EQ(expand("${PWD:+alt}"), "alt");
  EXPECT_EQ(expand("${EMPTY:+alt}"), "");
  EXPECT_EQ(expand("${NOPE:+alt}"), "");
  EXPECT_EQ(expand("${EMPTY+alt}"), "alt");
  EXPECT_EQ(expand("${NOPE+alt}"), "");
  EXPECT_EQ(expand("${NOPE:-${PWD:-x}/y}"), "/home/y");
  EXPECT_EQ(expand("${NOPE:-'a b'}"), "a b");
  EXPECT_EQ(expand("${NOPE:-a\\}b}"), "a}b");
  EXPECT_EQ(expand("${EMPTY?}"), "");
  EXPECT_EQ(expand("${PWD:?}"), "/home");
}

TEST(WordExpansionTest, RequiredVariables) {
  EXPECT_EQ(expandError("${NOPE:?}"),
            "Cannot expand '${NOPE:?}': NOPE: is not allowed to be unset");
  EXPECT_EQ(expandError("${NOPE?}"), "Cannot expand '${NOPE?}': NOPE: is not allowed to be unset");
  EXPECT_EQ(expandError("${NOPE:?set NOPE with --build-arg}"),
            "Cannot expand '${NOPE:?set NOPE with --build-arg}': NOPE: set NOPE with --build-arg");
  EXPECT_EQ(expandError("${EMPTY:?}"),
            "Cannot expand '${EMPTY:?}': EMPTY: is not allowed to be empty");
}

TEST(WordExpansionTest, PatternModifiers) {
  EXPECT_EQ(expand("${V#f*b}"), "arbaz");
  EXPECT_EQ(expand("${V##f*b}"), "az");
  EXPECT_EQ(expand("${V%b*}"), "foobar");
  EXPECT_EQ(expand("${V%%b*}"), "foo");
  EXPECT_EQ(expand("${V#x}"), "foobarbaz");
  EXPECT_EQ(expand("${V/ba/fo}"), "fooforbaz");
  EXPECT_EQ(expand("${V//ba/fo}"), "fooforfoz");
  EXPECT_EQ(expand("${V/b*a/-}"), "foo-z");  // as long as possible
  EXPECT_EQ(expand("${DOTS//./-}"), "1-2-3");
  EXPECT_EQ(expand("${PATHV//\\//:}"), ":a:b:c");
  EXPECT_EQ(expand("${NOPE/a/b}"), "");
  EXPECT_EQ(expand("${V/#/x}"), "foobarbaz");  // "#" is a literal here
  EXPECT_EQ(expand("${V//?/.}"), ".........");
  EXPECT_EQ(expand("${V//*/x}"), "x");  // Go's rule: no empty match right after a match
  EXPECT_EQ(expand("${V#\\*}"), "foobarbaz");
  EXPECT_EQ(expandError("${V:#x}"),
            "Cannot expand '${V:#x}': unsupported modifier ':#' in a substitution (supported: :- "
            "- :+ + :? ? # ## % %% / //)");
  EXPECT_EQ(expandError("${V#\\q}"),
            "Cannot expand '${V#\\q}': Bad pattern '\\q': '\\' may only escape '*', '?' or '\\'");
}

TEST(WordExpansionTest, SyntaxErrors) {
  EXPECT_EQ(expandError("${PWD"), "Cannot expand '${PWD': a '${' has no matching '}'");
  EXPECT_EQ(expandError("${"), "Cannot expand '${': a '${' has no matching '}'");
  EXPECT_EQ(expandError("${NOPE:-x"), "Cannot expand '${NOPE:-x': a '${' has no matching '}'");
  EXPECT_EQ(expandError("${}"),
            "Cannot expand '${}': bad substitution: '${' must be followed by a variable name");
  EXPECT_EQ(expandError("${:x}"),
            "Cannot expand '${:x}': bad substitution: '${' must be followed by a variable name");
  EXPECT_EQ(expandError("${PWD:=x}"),
            "Cannot expand '${PWD:=x}': unsupported modifier ':=' in a substitution (supported: "
            ":- - :+ + :? ? # ## % %% / //)");
  EXPECT_EQ(expandError("${PWD^}"),
            "Cannot expand '${PWD^}': unsupported modifier '^' in a substitution (supported: :- "
            "- :+ + :? ? # ## % %% / //)");
  EXPECT_EQ(expandError("he'llo"), "Cannot expand 'he'llo': a single quote (') is not closed");
  EXPECT_EQ(expandError("\"abc"), "Cannot expand '\"abc': a double quote (\") is not closed");
  EXPECT_EQ(expandError("\"abc\\"), "Cannot expand '\"abc\\': a double quote (\") is not closed");
  EXPECT_EQ(expandError("he\\\\'llo"),
            "Cannot expand 'he\\\\'llo': a single quote (') is not closed");
  EXPECT_EQ(expandError("${V/a"), "Cannot expand '${V/a': a '${VAR/' has no matching '/'");
  EXPECT_EQ(expandError("${V/a/b"), "Cannot expand '${V/a/b': a '${' has no matching '}'");
}

TEST(WordExpansionTest, BacktickEscape) {
  EXPECT_EQ(expand("a`$b", '`'), "a$b");
  EXPECT_EQ(expand("C:\\dir\\x", '`'), "C:\\dir\\x");
  EXPECT_EQ(expand("\"a`\"b\"", '`'), "a\"b");
  EXPECT_EQ(expand("$PWD`$PWD", '`'), "/home$PWD");
}

TEST(WordExpansionTest, Words) {
  EXPECT_EQ(words("a b  c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(words("'a b' c"), (std::vector<std::string>{"a b", "c"}));
  EXPECT_EQ(words("$SPACED"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(words("\"$SPACED\""), (std::vector<std::string>{"x  y"}));
  EXPECT_EQ(words("a\\ b"), (std::vector<std::string>{"a b"}));
  EXPECT_EQ(words("pre$SPACED"), (std::vector<std::string>{"prex", "y"}));
  EXPECT_EQ(words("${NOPE:-8000 9000}/tcp"), (std::vector<std::string>{"8000", "9000/tcp"}));
  EXPECT_TRUE(words("").empty());
  EXPECT_TRUE(words("\"\"").empty());  // as BuildKit: an empty quoted word is dropped
  EXPECT_TRUE(words("   ").empty());
  EXPECT_EQ(words("<< EOF x"), (std::vector<std::string>{"<< EOF", "x"}));
}

TEST(WordExpansionTest, Heredoc) {
  auto out = expandHeredoc("echo \"$PWD\" '${SHELL}' \\$PWD\nline2 $NOPE.\n", lookup);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(*out, "echo \"/home\" 'bash' $PWD\nline2 .\n");
  auto unclosed = expandHeredoc("it's fine\n", lookup);
  ASSERT_TRUE(unclosed);
  EXPECT_EQ(*unclosed, "it's fine\n");
}

TEST(WordExpansionTest, NoLookupMeansEverythingUnset) {
  auto out = expandWord("a${X:-b}$Y", nullptr);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "ab");
}

TEST(WordExpansionTest, RawModesForHeredocDetection) {
  LexOptions raw;
  raw.raw_quotes = true;
  raw.raw_escapes = true;
  raw.skip_unset = true;
  auto out = lexWord("RUN cat <<\"EOF\" $X ${Y:-z} \\$q > 'a b'", nullptr, raw);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(out->words, (std::vector<std::string>{"RUN", "cat", "<<\"EOF\"", "$X", "${Y:-z}",
                                                  "\\$q", ">", "'a b'"}));
}

TEST(WordExpansionTest, Limits) {
  std::string nested;
  for (int i = 0; i < 40; ++i) nested += "${A:-";
  nested += "x";
  for (int i = 0; i < 40; ++i) nested += "}";
  auto deep = expandWord(nested, lookup);
  ASSERT_FALSE(deep);
  EXPECT_TRUE(deep.error().message().ends_with("substitutions are nested deeper than 32"))
      << deep.error().message();
  std::string ok_nested;
  for (int i = 0; i < 30; ++i) ok_nested += "${A:-";
  ok_nested += "x";
  for (int i = 0; i < 30; ++i) ok_nested += "}";
  EXPECT_EQ(expand(ok_nested), "x");

  const std::string big(600000, 'b');
  auto big_lookup = [&](std::string_view) -> std::optional<std::string> { return big; };
  auto huge = expandWord("$B$B", big_lookup);
  ASSERT_FALSE(huge);
  EXPECT_TRUE(huge.error().message().ends_with("it expands to more than 1048576 bytes"))
      << huge.error().message();
  auto quoted = expandWord("\"$B$B\"", big_lookup);
  ASSERT_FALSE(quoted);
  // Pattern substitution on a long value is refused rather than slow.
  auto replace = expandWord("${B//b*b*b*b/x}", big_lookup);
  ASSERT_FALSE(replace);
  EXPECT_TRUE(
      replace.error().message().ends_with("the value is too long for a pattern "
                                          "substitution"))
      << replace.error().message();
  EXPECT_EQ(expandWord("${B#b}", big_lookup)->size(), big.size() - 1);
}

TEST(WordExpansionTest, LongWordsAreShortenedInMessages) {
  const std::string word = "${" + std::string(300, 'x');
  auto out = expandWord(word, lookup);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().message(),
            "Cannot expand '${" + std::string(198, 'x') + "...': a '${' has no matching '}'");
}

}  // namespace
}  // namespace hutch::build

// Glob patterns of the three dialects a Dockerfile build meets, compiled to one small automaton:
//
//   kFilepath      Go's filepath.Match (Unix), what COPY and ADD sources use:
//                    *        any run of characters other than '/'
//                    ?        one character other than '/'
//                    [a-z]    a class: ranges and single characters, [^...] negated; a class may
//                             match '/' (as Go's does); ']' and '-' must be escaped inside it
//                    \c       the character c itself
//   kDockerignore  .dockerignore patterns (moby/patternmatcher): kFilepath plus
//                    **/      any number of leading directories, none included ("**/x" is "x"
//                             or "a/b/x"); "**" not followed by '/' inside a pattern is the same
//                    **       at the end: anything at all, '/' included
//                  and patternmatcher's one quirk kept: a pattern that starts with "**" and has
//                  no other wildcard matches by suffix ("**.txt" matches "a/b.txt").
//   kShellParam    the pattern of ${VAR#pattern}, ${VAR%pattern}, ${VAR/pattern/x} (BuildKit's
//                  shell lexer): '*' any run and '?' any one character except a newline ('/'
//                  included), "\*" "\?" "\\" literal, any other character literal.
//
// Characters are UTF-8 code points as Go decodes them (a byte that is not valid UTF-8 is a
// character of its own that only '?' and '*' match). Matching is an automaton simulation:
// O(pattern length x name length), no backtracking, no recursion, so hostile patterns cannot
// blow up time or stack.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::build {

class Glob {
 public:
  enum class Syntax { kFilepath, kDockerignore, kShellParam };

  // kInvalidArgument for a malformed pattern (an unclosed or empty class, a trailing '\', a
  // range with a missing end, and for kShellParam an escape of another character than * ? \);
  // the message quotes the pattern and says what is wrong. Go checks the whole pattern too, so
  // "a[" is refused even against a name it could never match.
  static Result<Glob> compile(std::string_view pattern, Syntax syntax);

  // True when the whole of `name` matches.
  bool matches(std::string_view name) const;

  // The byte lengths n (ascending) for which name.substr(0, n) matches the whole pattern.
  std::vector<size_t> prefixMatches(std::string_view name) const;
  // The byte lengths n (ascending) for which the last n bytes of `name` match the whole pattern.
  std::vector<size_t> suffixMatches(std::string_view name) const;

  // True when the pattern has no wildcard at all (it matches one string: literal()).
  bool isLiteral() const { return literal_only_; }
  const std::string& literal() const { return literal_; }
  const std::string& pattern() const { return pattern_; }

  // Go's containsWildcards, used by COPY to decide whether a source is a pattern: '*', '?' or '['
  // not preceded by a '\'.
  static bool hasWildcards(std::string_view text);

  // One element of the compiled pattern (public for the matcher's helpers; not an interface).
  struct Token {
    enum class Kind {
      kLiteral,     // one character, `lo`
      kAnyOne,      // '?'
      kStar,        // '*'
      kClass,       // [...]: `ranges`, `negated`
      kDirsPrefix,  // "**/": empty, or any run that ends with '/'
      kAnything,    // "**" at the end
    };
    Kind kind = Kind::kLiteral;
    char32_t lo = 0;
    std::vector<std::pair<char32_t, char32_t>> ranges;
    bool negated = false;
  };

 private:
  Glob() = default;
  // The states reachable after reading `text` from the start, each step reported to `step`
  // (called with the rune count consumed so far and whether the whole pattern matched there).
  template <class Step>
  void run(const std::u32string& text, bool reversed, Step&& step) const;

  std::string pattern_;
  Syntax syntax_ = Syntax::kFilepath;
  std::vector<Token> tokens_;
  bool literal_only_ = true;
  std::string literal_;
  // patternmatcher's suffix quirk: "**" + `suffix_` (no other wildcard) matches by suffix.
  bool suffix_match_ = false;
  std::string suffix_;
};

// `text` as code points the way Go's utf8.DecodeRuneInString reads it; a byte that does not
// start a valid sequence becomes 0x110000 + byte (never equal to a real code point), and
// `offsets` (when given) receives the byte offset where each one starts, plus text.size().
std::u32string decodeRunes(std::string_view text, std::vector<size_t>* offsets = nullptr);

}  // namespace hutch::build

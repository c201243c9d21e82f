#include "build/glob.h"

#include <fmt/format.h>

#include "base/check.h"

namespace hutch::build {

namespace {

constexpr char32_t kInvalidBase = 0x110000;
constexpr char32_t kReplacement = 0xFFFD;

// Appends the UTF-8 form of `r` (a byte of its own for an undecodable one).
void appendRune(std::string& out, char32_t r) {
  if (r >= kInvalidBase) {
    out.push_back(static_cast<char>(r - kInvalidBase));
  } else if (r < 0x80) {
    out.push_back(static_cast<char>(r));
  } else if (r < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (r >> 6)));
    out.push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else if (r < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (r >> 12)));
    out.push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (r >> 18)));
    out.push_back(static_cast<char>(0x80 | ((r >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (r & 0x3F)));
  }
}

Error badPattern(std::string_view pattern, std::string_view what) {
  return Error(Errc::kInvalidArgument,
               fmt::format("Bad pattern '{}': {}", pattern.substr(0, 200), what));
}

}  // namespace

std::u32string decodeRunes(std::string_view text, std::vector<size_t>* offsets) {
  std::u32string out;
  out.reserve(text.size());
  if (offsets != nullptr) {
    offsets->clear();
    offsets->reserve(text.size() + 1);
  }
  size_t i = 0;
  while (i < text.size()) {
    if (offsets != nullptr) offsets->push_back(i);
    const auto b0 = static_cast<unsigned char>(text[i]);
    size_t need = 0;
    char32_t r = 0;
    char32_t min = 0;
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    } else if ((b0 & 0xE0) == 0xC0) {
      need = 1, r = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      need = 2, r = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      need = 3, r = b0 & 0x07, min = 0x10000;
    }
    bool valid = need > 0;
    for (size_t k = 1; valid && k <= need; ++k) {
      if (i + k >= text.size()) {
        valid = false;
        break;
      }
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) {
        valid = false;
        break;
      }
      r = (r << 6) | (b & 0x3F);
    }
    if (valid && (r < min || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF))) valid = false;
    if (valid) {
      out.push_back(r);
      i += need + 1;
    } else {
      out.push_back(kInvalidBase + b0);
      ++i;
    }
  }
  if (offsets != nullptr) offsets->push_back(text.size());
  return out;
}

bool Glob::hasWildcards(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      ++i;
    } else if (c == '*' || c == '?' || c == '[') {
      return true;
    }
  }
  return false;
}

Result<Glob> Glob::compile(std::string_view pattern, Syntax syntax) {
  Glob g;
  g.pattern_ = std::string(pattern);
  g.syntax_ = syntax;
  const std::u32string p = decodeRunes(pattern);
  const size_t n = p.size();
  auto add = [&](Token::Kind kind, char32_t lo = 0) {
    Token t;
    t.kind = kind;
    t.lo = lo;
    g.tokens_.push_back(std::move(t));
    if (kind != Token::Kind::kLiteral) g.literal_only_ = false;
  };

  if (syntax == Syntax::kShellParam) {
    for (size_t i = 0; i < n; ++i) {
      const char32_t c = p[i];
      if (c == '*') {
        add(Token::Kind::kStar);
      } else if (c == '?') {
        add(Token::Kind::kAnyOne);
      } else if (c == '\\') {
        // "\}" and "\/" are the lexer's escapes of its own delimiters: the character is literal.
        if (i + 1 < n && (p[i + 1] == '}' || p[i + 1] == '/')) continue;
        if (i + 1 >= n || (p[i + 1] != '*' && p[i + 1] != '?' && p[i + 1] != '\\')) {
          return fail(badPattern(pattern, "'\\' may only escape '*', '?' or '\\'"));
        }
        add(Token::Kind::kLiteral, p[++i]);
      } else {
        add(Token::Kind::kLiteral, c);
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const char32_t c = p[i];
      if (c == '*') {
        if (syntax == Syntax::kDockerignore && i + 1 < n && p[i + 1] == '*') {
          const bool at_start = i == 0;
          ++i;
          if (i + 1 < n && p[i + 1] == '/') ++i;
          add(i + 1 >= n ? Token::Kind::kAnything : Token::Kind::kDirsPrefix);
          if (at_start) {
            // patternmatcher matches "**<rest>" by suffix when <rest> has no other wildcard.
            const std::string_view rest = pattern.substr(2);
            if (rest.find_first_of("*?[]\\") == std::string_view::npos) {
              g.suffix_match_ = true;
              g.suffix_ = std::string(rest);
            }
          }
        } else {
          add(Token::Kind::kStar);
        }
      } else if (c == '?') {
        add(Token::Kind::kAnyOne);
      } else if (c == '\\') {
        if (i + 1 >= n) return fail(badPattern(pattern, "it ends with '\\' (escape it as '\\\\')"));
        add(Token::Kind::kLiteral, p[++i]);
      } else if (c == '[') {
        Token t;
        t.kind = Token::Kind::kClass;
        ++i;
        if (i < n && p[i] == '^') {
          t.negated = true;
          ++i;
        }
        // One character of a range: not '-' or ']' unless escaped, and never the end.
        auto classChar = [&](char32_t& out) -> bool {
          if (i >= n || p[i] == '-' || p[i] == ']') return false;
          if (p[i] == '\\') {
            ++i;
            if (i >= n) return false;
          }
          if (p[i] >= kInvalidBase) return false;
          out = p[i++];
          return i < n;
        };
        for (;;) {
          if (i < n && p[i] == ']' && !t.ranges.empty()) break;
          char32_t lo = 0;
          if (!classChar(lo)) {
            return fail(badPattern(pattern,
                                   "a character class ('[...]') is empty, unclosed or has a "
                                   "stray '-' or ']' (escape them with '\\')"));
          }
          char32_t hi = lo;
          if (p[i] == '-') {
            ++i;
            if (!classChar(hi)) {
              return fail(badPattern(pattern, "a range in a character class has no end"));
            }
          }
          t.ranges.emplace_back(lo, hi);
        }
        g.tokens_.push_back(std::move(t));
        g.literal_only_ = false;
      } else {
        add(Token::Kind::kLiteral, c);
      }
    }
  }
  if (g.literal_only_) {
    for (const Token& t : g.tokens_) appendRune(g.literal_, t.lo);
  }
  return g;
}

template <class Step>
void Glob::run(const std::u32string& text, bool reversed, Step&& step) const {
  const size_t count = tokens_.size();
  const char32_t excluded = syntax_ == Syntax::kShellParam ? U'\n' : U'/';
  auto token = [&](size_t k) -> const Token& { return tokens_[reversed ? count - 1 - k : k]; };
  std::vector<char> cur(count + 1, 0), next(count + 1, 0);
  std::vector<char> inside(count, 0), next_inside(count, 0);
  auto closure = [&](std::vector<char>& set) {
    bool any = false;
    for (size_t k = 0; k < count; ++k) {
      if (!set[k]) continue;
      any = true;
      const Token::Kind kind = token(k).kind;
      if (kind == Token::Kind::kStar || kind == Token::Kind::kDirsPrefix ||
          kind == Token::Kind::kAnything) {
        set[k + 1] = 1;
      }
    }
    return any || set[count];
  };
  cur[0] = 1;
  bool alive = closure(cur);
  if (!step(0, cur[count] != 0)) return;
  for (size_t pos = 0; pos < text.size() && alive; ++pos) {
    const char32_t c = text[pos];
    std::fill(next.begin(), next.end(), 0);
    std::fill(next_inside.begin(), next_inside.end(), 0);
    bool any_inside = false;
    for (size_t k = 0; k < count; ++k) {
      const Token& t = token(k);
      if (inside[k]) {
        // Within "**/": any run (no newline, as patternmatcher's '.') that ends at a '/'.
        if (c == '/') next[k + 1] = 1;
        if (c != '\n') next_inside[k] = any_inside = 1;
      }
      if (!cur[k]) continue;
      switch (t.kind) {
        case Token::Kind::kLiteral:
          if (c == t.lo) next[k + 1] = 1;
          break;
        case Token::Kind::kAnyOne:
          if (c != excluded) next[k + 1] = 1;
          break;
        case Token::Kind::kClass: {
          const char32_t r = c >= kInvalidBase ? kReplacement : c;
          bool in = false;
          for (const auto& [lo, hi] : t.ranges) {
            if (lo <= r && r <= hi) {
              in = true;
              break;
            }
          }
          if (in != t.negated) next[k + 1] = 1;
          break;
        }
        case Token::Kind::kStar:
          if (c != excluded) next[k] = 1;
          break;
        case Token::Kind::kDirsPrefix:
          if (c == '/') next[k + 1] = 1;
          if (c != '\n') next_inside[k] = any_inside = 1;
          break;
        case Token::Kind::kAnything:
          if (c != '\n') next[k] = 1;
          break;
      }
    }
    cur.swap(next);
    inside.swap(next_inside);
    alive = closure(cur) || any_inside;
    if (!step(pos + 1, cur[count] != 0)) return;
  }
}

bool Glob::matches(std::string_view name) const {
  if (suffix_match_) {
    if (name.ends_with(suffix_)) return true;
    return !suffix_.empty() && suffix_[0] == '/' && name == std::string_view(suffix_).substr(1);
  }
  if (literal_only_) return name == literal_;
  const std::u32string text = decodeRunes(name);
  bool matched = false;
  run(text, false, [&](size_t consumed, bool accept) {
    if (consumed == text.size()) matched = accept;
    return true;
  });
  return matched;
}

std::vector<size_t> Glob::prefixMatches(std::string_view name) const {
  HUTCH_CHECK(!suffix_match_);
  std::vector<size_t> offsets;
  const std::u32string text = decodeRunes(name, &offsets);
  std::vector<size_t> out;
  run(text, false, [&](size_t consumed, bool accept) {
    if (accept) out.push_back(offsets[consumed]);
    return true;
  });
  return out;
}

std::vector<size_t> Glob::suffixMatches(std::string_view name) const {
  // Reversing a pattern is only sound for single-character tokens and plain stars.
  HUTCH_CHECK(syntax_ != Syntax::kDockerignore);
  std::vector<size_t> offsets;
  std::u32string text = decodeRunes(name, &offsets);
  const size_t n = text.size();
  std::u32string reversed(text.rbegin(), text.rend());
  std::vector<size_t> out;
  run(reversed, true, [&](size_t consumed, bool accept) {
    if (accept) out.push_back(name.size() - offsets[n - consumed]);
    return true;
  });
  return out;
}

}  // namespace hutch::build

#include "build/word_expansion.h"

#include <fmt/format.h>

#include "build/glob.h"

namespace hutch::build {

namespace {

constexpr int kEof = -1;
// Pattern substitutions simulate an automaton per start position: their cost is bounded.
constexpr size_t kMaxPatternWork = size_t{1} << 24;

bool isSpace(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
bool isDigit(int c) {
  return c >= '0' && c <= '9';
}
bool isNameChar(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || isDigit(c) || c == '_';
}
bool isSpecialParam(int c) {
  return c == '@' || c == '*' || c == '#' || c == '?' || c == '-' || c == '$' || c == '!' ||
         c == '0';
}

// The words of a lexed string: characters from expansions split at white space, quoted and
// escaped ones never.
class Words {
 public:
  void addChar(char c) {
    if (isSpace(static_cast<unsigned char>(c))) {
      if (in_word_ && !buf_.empty()) {
        words_.push_back(std::move(buf_));
        buf_.clear();
        in_word_ = false;
      }
      return;
    }
    addRawChar(c);
  }
  void addRawChar(char c) {
    buf_.push_back(c);
    in_word_ = true;
  }
  void addString(std::string_view s) {
    for (char c : s) addChar(c);
  }
  void addRawString(std::string_view s) {
    buf_.append(s);
    in_word_ = true;
  }
  std::vector<std::string> take() {
    if (!buf_.empty()) words_.push_back(std::move(buf_));
    buf_.clear();
    return std::move(words_);
  }

 private:
  std::string buf_;
  std::vector<std::string> words_;
  bool in_word_ = false;
};

// What went wrong, without the word (the caller adds it).
struct LexError {
  std::string what;
};

class Lexer {
 public:
  Lexer(std::string_view in, const VariableLookup& lookup, const LexOptions& options)
      : in_(in), lookup_(lookup), opt_(options), raw_escapes_(options.raw_escapes) {}

  // Reads up to `stop` (consumed) or the end; kEof means the end is expected.
  tl::expected<std::string, LexError> process(int stop, bool raw_escapes, Words* words) {
    const bool saved = raw_escapes_;
    raw_escapes_ = raw_escapes;
    auto out = processInner(stop, words);
    raw_escapes_ = saved;
    return out;
  }

 private:
  int peek() const { return pos_ < in_.size() ? static_cast<unsigned char>(in_[pos_]) : kEof; }
  int next() { return pos_ < in_.size() ? static_cast<unsigned char>(in_[pos_++]) : kEof; }

  static tl::unexpected<LexError> err(std::string what) {
    return tl::unexpected(LexError{std::move(what)});
  }
  static tl::expected<void, LexError> checkSize(const std::string& s) {
    if (s.size() > kMaxExpandedBytes) {
      return err(fmt::format("it expands to more than {} bytes", kMaxExpandedBytes));
    }
    return {};
  }

  tl::expected<std::string, LexError> processInner(int stop, Words* words) {
    std::string result;
    Words local;
    Words& w = words != nullptr ? *words : local;
    while (peek() != kEof) {
      const int ch = peek();
      if (stop != kEof && ch == stop) {
        next();
        return result;
      }
      const bool quote = opt_.process_quotes && (ch == '\'' || ch == '"');
      if (ch == '$' || ch == '<' || quote) {
        tl::expected<std::string, LexError> part;
        if (ch == '$') {
          part = dollar();
        } else if (ch == '<') {
          part = possibleHeredoc();
        } else if (ch == '\'') {
          part = singleQuote();
        } else {
          part = doubleQuote();
        }
        if (!part) return tl::unexpected(part.error());
        result += *part;
        if (auto ok = checkSize(result); !ok) return tl::unexpected(ok.error());
        if (ch == '$') {
          w.addString(*part);
        } else {
          w.addRawString(*part);
        }
        continue;
      }
      int c = next();
      if (c == static_cast<unsigned char>(opt_.escape)) {
        if (raw_escapes_) {
          w.addRawChar(static_cast<char>(c));
          result.push_back(static_cast<char>(c));
        }
        c = next();
        if (c == kEof) break;
        w.addRawChar(static_cast<char>(c));
      } else {
        w.addChar(static_cast<char>(c));
      }
      result.push_back(static_cast<char>(c));
    }
    if (stop != kEof) {
      return err(fmt::format("unexpected end of the word while looking for a matching '{}'",
                             static_cast<char>(stop)));
    }
    return result;
  }

  tl::expected<std::string, LexError> singleQuote() {
    std::string out;
    int c = next();
    if (opt_.raw_quotes) out.push_back(static_cast<char>(c));
    for (;;) {
      c = next();
      if (c == kEof) return err("a single quote (') is not closed");
      out.push_back(static_cast<char>(c));
      if (c == '\'') {
        if (!opt_.raw_quotes) out.pop_back();
        return out;
      }
    }
  }

  tl::expected<std::string, LexError> doubleQuote() {
    std::string out;
    int c = next();
    if (opt_.raw_quotes) out.push_back(static_cast<char>(c));
    for (;;) {
      const int p = peek();
      if (p == kEof) return err("a double quote (\") is not closed");
      if (p == '"') {
        c = next();
        if (opt_.raw_quotes) out.push_back(static_cast<char>(c));
        return out;
      }
      if (p == '$') {
        auto value = dollar();
        if (!value) return value;
        out += *value;
        if (auto ok = checkSize(out); !ok) return tl::unexpected(ok.error());
        continue;
      }
      c = next();
      if (c == static_cast<unsigned char>(opt_.escape)) {
        if (raw_escapes_) out.push_back(static_cast<char>(c));
        const int after = peek();
        if (after == kEof) continue;  // the next turn reports the missing quote
        if (after == '"' || after == '$' || after == static_cast<unsigned char>(opt_.escape)) {
          c = next();
        }
      }
      out.push_back(static_cast<char>(c));
    }
  }

  // "<<" and the blanks after it stay together as one raw piece: a heredoc marker is one word.
  tl::expected<std::string, LexError> possibleHeredoc() {
    next();
    if (peek() != '<') return std::string("<");
    next();
    std::string out = "<<";
    while (peek() == ' ' || peek() == '\t' || peek() == '\r')
      out.push_back(static_cast<char>(next()));
    return out;
  }

  std::string name() {
    std::string out;
    while (peek() != kEof) {
      const int c = peek();
      if (out.empty() && isDigit(c)) {
        while (isDigit(peek())) out.push_back(static_cast<char>(next()));
        return out;
      }
      if (out.empty() && isSpecialParam(c)) {
        out.push_back(static_cast<char>(next()));
        return out;
      }
      if (!isNameChar(c)) break;
      out.push_back(static_cast<char>(next()));
    }
    return out;
  }

  std::optional<std::string> get(const std::string& name) {
    if (!lookup_) return std::nullopt;
    return lookup_(name);
  }

  tl::expected<std::string, LexError> dollar() {
    next();  // '$'
    if (peek() != '{') {
      std::string n = name();
      if (n.empty()) return std::string("$");
      auto value = get(n);
      if (!value && opt_.skip_unset) return "$" + n;
      return value.value_or("");
    }
    next();  // '{'
    const int first = peek();
    if (first == kEof) return err("a '${' has no matching '}'");
    if (first == '{' || first == '}' || first == ':') {
      return err("bad substitution: '${' must be followed by a variable name");
    }
    if (++depth_ > kMaxSubstitutionDepth) {
      return err(fmt::format("substitutions are nested deeper than {}", kMaxSubstitutionDepth));
    }
    auto out = substitution();
    --depth_;
    return out;
  }

  tl::expected<std::string, LexError> substitution() {
    const std::string n = name();
    int ch = next();
    if (ch == '}') {
      auto value = get(n);
      if (!value && opt_.skip_unset) return "${" + n + "}";
      return value.value_or("");
    }
    if (ch == kEof) return err("a '${' has no matching '}'");
    std::string modifier(1, static_cast<char>(ch));
    if (ch == '/') return replace(n);
    bool null_is_unset = false;
    if (ch == ':') {
      null_is_unset = true;
      ch = next();
      if (ch == kEof) return err("a '${' has no matching '}'");
      modifier.push_back(static_cast<char>(ch));
    } else if (ch != '+' && ch != '-' && ch != '?' && ch != '#' && ch != '%') {
      return unsupported(modifier);
    }
    const bool pattern_op = ch == '#' || ch == '%';
    if (null_is_unset && pattern_op) return unsupported(modifier);
    auto word = process('}', pattern_op, nullptr);
    if (!word) {
      if (peek() == kEof) return err("a '${' has no matching '}'");
      return word;
    }
    auto value = get(n);
    if (!value && opt_.skip_unset) return "${" + n + modifier + *word + "}";
    const bool set = value.has_value();
    const std::string v = value.value_or("");
    switch (ch) {
      case '-': return (!set || (null_is_unset && v.empty())) ? *word : v;
      case '+': return (!set || (null_is_unset && v.empty())) ? std::string() : *word;
      case '?':
        if (!set) return err(n + ": " + (word->empty() ? "is not allowed to be unset" : *word));
        if (null_is_unset && v.empty()) {
          return err(n + ": " + (word->empty() ? "is not allowed to be empty" : *word));
        }
        return v;
      case '#':
      case '%': return trim(v, *word, ch == '#');
      default: return unsupported(modifier);
    }
  }

  static tl::unexpected<LexError> unsupported(const std::string& modifier) {
    return err(fmt::format(
        "unsupported modifier '{}' in a substitution (supported: :- - :+ + :? ? # ## % %% / //)",
        modifier));
  }

  static tl::expected<Glob, LexError> shellPattern(const std::string& pattern) {
    auto glob = Glob::compile(pattern, Glob::Syntax::kShellParam);
    if (!glob) return err(glob.error().message());
    return std::move(*glob);
  }

  // ${v#pat} ${v##pat} (prefix) and ${v%pat} ${v%%pat} (suffix).
  tl::expected<std::string, LexError> trim(const std::string& value, std::string pattern,
                                           bool prefix) {
    const char op = prefix ? '#' : '%';
    bool greedy = false;
    if (!pattern.empty() && pattern[0] == op) {
      greedy = true;
      pattern.erase(0, 1);
    }
    auto glob = shellPattern(pattern);
    if (!glob) return tl::unexpected(glob.error());
    if ((value.size() + 1) * (pattern.size() + 1) > kMaxPatternWork) {
      return err("the value is too long for a pattern substitution");
    }
    const std::vector<size_t> lengths =
        prefix ? glob->prefixMatches(value) : glob->suffixMatches(value);
    if (lengths.empty()) return value;
    const size_t cut = greedy ? lengths.back() : lengths.front();
    return prefix ? value.substr(cut) : value.substr(0, value.size() - cut);
  }

  // ${v/pat/rep} and ${v//pat/rep}: leftmost matches, each as long as possible, replaced
  // literally; an empty match right after a match is not replaced (as Go's ReplaceAllString).
  tl::expected<std::string, LexError> replace(const std::string& n) {
    const bool all = peek() == '/';
    if (all) next();
    auto pattern = process('/', true, nullptr);
    if (!pattern) {
      if (peek() == kEof) return err("a '${VAR/' has no matching '/'");
      return pattern;
    }
    auto replacement = process('}', true, nullptr);
    if (!replacement) {
      if (peek() == kEof) return err("a '${' has no matching '}'");
      return replacement;
    }
    auto value = get(n);
    if (!value && opt_.skip_unset) {
      return "${" + n + (all ? "//" : "/") + *pattern + "/" + *replacement + "}";
    }
    const std::string v = value.value_or("");
    auto glob = shellPattern(*pattern);
    if (!glob) return tl::unexpected(glob.error());
    if ((v.size() + 1) * (v.size() + 1) * (pattern->size() + 1) > kMaxPatternWork) {
      return err("the value is too long for a pattern substitution");
    }
    std::vector<size_t> offsets;
    decodeRunes(v, &offsets);  // rune starts, to advance by whole characters
    // The leftmost match at or after byte `from`: [start, end), or nullopt.
    auto find = [&](size_t from) -> std::optional<std::pair<size_t, size_t>> {
      for (size_t k = 0; k < offsets.size(); ++k) {
        const size_t start = offsets[k];
        if (start < from) continue;
        std::vector<size_t> ends = glob->prefixMatches(std::string_view(v).substr(start));
        if (!ends.empty()) return std::make_pair(start, start + ends.back());
      }
      return std::nullopt;
    };
    std::string out;
    size_t search = 0;
    size_t last_end = 0;
    while (search <= v.size()) {
      auto m = find(search);
      if (!m) break;
      out.append(v, last_end, m->first - last_end);
      if (m->second > last_end || m->first == 0) out += *replacement;
      last_end = m->second;
      if (auto ok = checkSize(out); !ok) return tl::unexpected(ok.error());
      if (!all) break;
      // Advance past the match, at least one character.
      size_t width = 1;
      for (size_t k = 0; k + 1 < offsets.size(); ++k) {
        if (offsets[k] == search) {
          width = offsets[k + 1] - offsets[k];
          break;
        }
      }
      if (search + width > m->second) {
        search += width;
      } else if (search + 1 > m->second) {
        ++search;
      } else {
        search = m->second;
      }
    }
    out.append(v, last_end, std::string::npos);
    return out;
  }

  std::string_view in_;
  size_t pos_ = 0;
  const VariableLookup& lookup_;
  LexOptions opt_;
  bool raw_escapes_;
  int depth_ = 0;
};

Error expansionError(std::string_view word, const LexError& e) {
  std::string shown(word.substr(0, 200));
  if (word.size() > 200) shown += "...";
  return Error(Errc::kInvalidArgument, fmt::format("Cannot expand '{}': {}", shown, e.what));
}

}  // namespace

Result<LexResult> lexWord(std::string_view word, const VariableLookup& lookup,
                          const LexOptions& options) {
  Lexer lexer(word, lookup, options);
  Words words;
  auto out = lexer.process(kEof, options.raw_escapes, &words);
  if (!out) return fail(expansionError(word, out.error()));
  return LexResult{std::move(*out), words.take()};
}

Result<std::string> expandWord(std::string_view word, const VariableLookup& lookup, char escape) {
  LexOptions options;
  options.escape = escape;
  HUTCH_TRY(LexResult r, lexWord(word, lookup, options));
  return std::move(r.word);
}

Result<std::vector<std::string>> expandWords(std::string_view word, const VariableLookup& lookup,
                                             char escape) {
  LexOptions options;
  options.escape = escape;
  HUTCH_TRY(LexResult r, lexWord(word, lookup, options));
  return std::move(r.words);
}

Result<std::string> expandHeredoc(std::string_view content, const VariableLookup& lookup) {
  LexOptions options;
  options.process_quotes = false;
  HUTCH_TRY(LexResult r, lexWord(content, lookup, options));
  return std::move(r.word);
}

}  // namespace hutch::build

#include "build/instruction_words.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace hutch::build::detail {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string shown(std::string_view s) {
  if (s.size() <= 120) return std::string(s);
  return std::string(s.substr(0, 120)) + "...";
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

tl::unexpected<Error> invalid(std::string message) {
  return fail(Errc::kInvalidArgument, std::move(message));
}

// BuildKit's extractBuilderFlags: leading "--" words, quotes removed and escapes processed;
// a lone "--" ends them. Returns the flags and what follows them.
std::pair<std::vector<std::string>, std::string_view> extractFlags(std::string_view line,
                                                                   char escape) {
  enum class Phase { kSpaces, kWord, kQuote };
  std::vector<std::string> words;
  Phase phase = Phase::kSpaces;
  std::string buf;
  char quote = 0;
  bool blank_ok = false;
  for (size_t pos = 0; pos <= line.size(); ++pos) {
    char c = pos < line.size() ? line[pos] : '\0';
    if (phase == Phase::kSpaces) {
      if (pos == line.size()) break;
      if (isSpace(c)) continue;
      if (c != '-' || pos + 1 == line.size() || line[pos + 1] != '-') {
        return {std::move(words), line.substr(pos)};
      }
      phase = Phase::kWord;
    }
    if (pos == line.size()) {
      if (buf != "--" && (blank_ok || !buf.empty())) words.push_back(buf);
      break;
    }
    if (phase == Phase::kWord) {
      if (isSpace(c)) {
        phase = Phase::kSpaces;
        if (buf == "--") return {std::move(words), line.substr(pos)};
        if (blank_ok || !buf.empty()) words.push_back(buf);
        buf.clear();
        blank_ok = false;
        continue;
      }
      if (c == '\'' || c == '"') {
        quote = c;
        blank_ok = true;
        phase = Phase::kQuote;
        continue;
      }
      if (c == escape) {
        if (pos + 1 == line.size()) continue;
        c = line[++pos];
      }
      buf.push_back(c);
      continue;
    }
    if (c == quote) {
      phase = Phase::kWord;
      continue;
    }
    if (c == escape) {
      if (pos + 1 == line.size()) {
        phase = Phase::kWord;
        continue;
      }
      c = line[++pos];
    }
    buf.push_back(c);
  }
  return {std::move(words), std::string_view()};
}

// Collects the strings of a top-level array; anything else at depth 1 marks it not a string
// array. nlohmann's parser is iterative, so nesting cannot exhaust the stack.
class StringArraySax : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool string(string_t& s) override {
    if (depth_ == 1) {
      items_.push_back(std::move(s));
    } else {
      scalar();
    }
    return true;
  }
  bool binary(binary_t&) override { return scalar(); }
  bool start_object(std::size_t) override {
    open(false);
    return true;
  }
  bool key(string_t&) override { return true; }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    open(true);
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  bool topIsArray() const { return top_is_array_; }
  bool onlyStrings() const { return only_strings_; }
  std::vector<std::string>& items() { return items_; }

 private:
  bool scalar() {
    if (depth_ == 1) only_strings_ = false;
    return true;
  }
  void open(bool array) {
    if (depth_ == 0) top_is_array_ = array;
    if (depth_ == 1) only_strings_ = false;
    ++depth_;
  }

  int depth_ = 0;
  bool top_is_array_ = false;
  bool only_strings_ = true;
  std::vector<std::string> items_;
};

bool isRegexSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

}  // namespace

// The words of `rest` split at runs of [\t\v\f\r ] (BuildKit's parseStringsWhitespaceDelimited):
// quotes are not special here; each word is expanded later.
std::vector<std::string> fields(std::string_view rest) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && isFieldSpace(rest[i])) ++i;
    const size_t start = i;
    while (i < rest.size() && !isFieldSpace(rest[i])) ++i;
    if (i > start) out.emplace_back(rest.substr(start, i - start));
  }
  return out;
}

// BuildKit's parseWords (ARG, ENV, LABEL): words at unquoted white space, quotes and escapes
// kept in them for the expansion that comes later.
std::vector<std::string> quotedWords(std::string_view rest, char escape) {
  enum class Phase { kSpaces, kWord, kQuote };
  std::vector<std::string> words;
  Phase phase = Phase::kSpaces;
  char quote = 0;
  bool blank_ok = false;
  std::string buf;
  for (size_t pos = 0; pos <= rest.size(); ++pos) {
    if (pos == rest.size()) {
      if (phase != Phase::kSpaces && (blank_ok || !buf.empty())) words.push_back(buf);
      break;
    }
    char c = rest[pos];
    if (phase == Phase::kSpaces) {
      if (isSpace(c)) continue;
      phase = Phase::kWord;
    }
    if (phase == Phase::kWord) {
      if (isSpace(c)) {
        phase = Phase::kSpaces;
        if (blank_ok || !buf.empty()) words.push_back(buf);
        buf.clear();
        blank_ok = false;
        continue;
      }
      if (c == '\'' || c == '"') {
        quote = c;
        blank_ok = true;
        phase = Phase::kQuote;
      }
      if (c == escape) {
        if (pos + 1 == rest.size()) continue;  // an escape at the very end is dropped
        buf.push_back(c);
        c = rest[++pos];
      }
      buf.push_back(c);
      continue;
    }
    // kQuote
    if (c == quote) phase = Phase::kWord;
    if (c == escape && quote != '\'') {
      if (pos + 1 == rest.size()) {
        phase = Phase::kWord;
        continue;
      }
      buf.push_back(c);
      c = rest[++pos];
    }
    buf.push_back(c);
  }
  return words;
}

InstructionLine splitInstructionLine(std::string_view line, char escape) {
  InstructionLine out;
  const std::string_view t = trim(line);
  size_t i = 0;
  while (i < t.size() && !isFieldSpace(t[i])) ++i;
  out.keyword = std::string(t.substr(0, i));
  while (i < t.size() && isFieldSpace(t[i])) ++i;
  const std::string_view args = t.substr(i);
  out.args_text = std::string(args);
  auto [flags, rest] = extractFlags(args, escape);
  out.flags = std::move(flags);
  out.rest = std::string(trim(rest));
  return out;
}

std::optional<Keyword> keywordOf(std::string_view word) {
  static constexpr std::pair<std::string_view, Keyword> kKeywords[] = {
      {"from", Keyword::kFrom},
      {"arg", Keyword::kArg},
      {"run", Keyword::kRun},
      {"cmd", Keyword::kCmd},
      {"entrypoint", Keyword::kEntrypoint},
      {"shell", Keyword::kShell},
      {"env", Keyword::kEnv},
      {"label", Keyword::kLabel},
      {"maintainer", Keyword::kMaintainer},
      {"expose", Keyword::kExpose},
      {"copy", Keyword::kCopy},
      {"add", Keyword::kAdd},
      {"workdir", Keyword::kWorkdir},
      {"user", Keyword::kUser},
      {"volume", Keyword::kVolume},
      {"stopsignal", Keyword::kStopSignal},
      {"healthcheck", Keyword::kHealthcheck},
  };
  if (word.size() > 16) return std::nullopt;
  const std::string l = lower(word);
  for (const auto& [name, keyword] : kKeywords) {
    if (name == l) return keyword;
  }
  return std::nullopt;
}

Result<std::optional<std::vector<std::string>>> parseJsonArray(std::string_view rest) {
  const std::string_view t = trim(rest);
  if (t.empty() || t[0] != '[') return std::optional<std::vector<std::string>>();
  StringArraySax sax;
  const bool parsed = nlohmann::json::sax_parse(t.begin(), t.end(), &sax);
  if (!parsed || !sax.topIsArray()) return std::optional<std::vector<std::string>>();
  if (!sax.onlyStrings()) {
    return invalid(
        "a JSON array here must hold only strings: [\"executable\", \"arg\"] (or write the "
        "shell form without brackets)");
  }
  return std::optional<std::vector<std::string>>(std::move(sax.items()));
}

Result<std::optional<Heredoc>> parseHeredocMarker(std::string_view word) {
  size_t i = 0;
  while (i < word.size() && word[i] >= '0' && word[i] <= '9') ++i;
  if (word.substr(i, 2) != "<<") return std::optional<Heredoc>();
  i += 2;
  Heredoc h;
  if (i < word.size() && word[i] == '-') {
    h.chomp = true;
    ++i;
  }
  while (i < word.size() && isRegexSpace(word[i])) ++i;
  const std::string_view rest = word.substr(i);
  if (rest.empty() || rest.find('<') != std::string_view::npos) return std::optional<Heredoc>();
  LexOptions options;
  options.skip_unset = true;
  auto cooked = lexWord(rest, nullptr, options);
  if (!cooked) {
    return invalid(fmt::format("the heredoc delimiter '{}' cannot be read: {}", shown(rest),
                               cooked.error().message()));
  }
  if (cooked->words.size() != 1) return std::optional<Heredoc>();
  options.raw_quotes = true;
  auto raw = lexWord(rest, nullptr, options);
  if (!raw || raw->words.size() != 1) {
    return invalid(fmt::format("the heredoc delimiter '{}' cannot be read", shown(rest)));
  }
  auto quotes = [](const std::string& s) {
    return std::count(s.begin(), s.end(), '\'') + std::count(s.begin(), s.end(), '"');
  };
  h.name = cooked->words[0];
  h.expand = quotes(cooked->words[0]) == quotes(raw->words[0]);
  return std::optional<Heredoc>(std::move(h));
}

Result<std::vector<Heredoc>> heredocMarkers(std::string_view line) {
  LexOptions options;
  options.raw_quotes = true;
  options.raw_escapes = true;
  options.skip_unset = true;
  std::vector<Heredoc> out;
  auto lexed = lexWord(line, nullptr, options);
  if (!lexed) return out;  // as BuildKit: a line it cannot lex has no heredocs
  for (const std::string& word : lexed->words) {
    HUTCH_TRY(auto marker, parseHeredocMarker(word));
    if (marker) out.push_back(std::move(*marker));
  }
  return out;
}

std::string chompHeredoc(std::string_view content) {
  std::string out;
  out.reserve(content.size());
  bool line_start = true;
  for (char c : content) {
    if (line_start && c == '\t') continue;
    line_start = c == '\n';
    out.push_back(c);
  }
  return out;
}

}  // namespace hutch::build::detail

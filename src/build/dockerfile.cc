#include "build/dockerfile.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "build/instruction_parser.h"
#include "image/reference.h"

namespace hutch::build {

namespace {

using detail::InstructionLine;

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string shown(std::string_view s) {
  if (s.size() <= 60) return std::string(s);
  return std::string(s.substr(0, 60)) + "...";
}

Error atLine(int line, const Error& e) {
  return Error(e.code(), fmt::format("Dockerfile line {}: {}", line, e.message()));
}
tl::unexpected<Error> invalidAt(int line, std::string message) {
  return fail(Errc::kInvalidArgument, fmt::format("Dockerfile line {}: {}", line, message));
}

// Physical lines, each with its line ending (bufio.Scanner with BuildKit's scanLines).
std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

std::string_view trimNewline(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
std::string_view trimLeft(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  return s;
}
bool isComment(std::string_view line) {
  line = trimLeft(line);
  return !line.empty() && line.front() == '#';
}

// BuildKit's line continuation: the escape character as the last non-blank one, not preceded
// by another escape (unless it is alone on the line). Returns the line without it, and whether
// the instruction ends here.
std::pair<std::string_view, bool> trimContinuation(std::string_view line, char escape) {
  size_t end = line.size();
  while (end > 0 && (line[end - 1] == ' ' || line[end - 1] == '\t')) --end;
  if (end == 0 || line[end - 1] != escape) return {line, true};
  if (end == 1) return {std::string_view(), false};
  if (line[end - 2] == escape) return {line, true};
  return {line.substr(0, end - 1), false};
}

// Parser directives: only on the first lines, each once.
class Directives {
 public:
  struct Directive {
    std::string name;
    std::string value;
  };

  // A directive on this line, or nullopt (and directives are over) for any other line.
  Result<std::optional<Directive>> parse(std::string_view line) {
    if (done_) return std::optional<Directive>();
    if (line.empty() || line.front() != '#') return over();
    std::string_view s = trimLeft(line.substr(1));
    size_t i = 0;
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    if (s.empty() || !alpha(s[0])) return over();
    while (i < s.size() && (alpha(s[i]) || (s[i] >= '0' && s[i] <= '9'))) ++i;
    const std::string name = lower(s.substr(0, i));
    auto blank = [](char c) {
      return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
    };
    while (i < s.size() && blank(s[i])) ++i;
    if (i >= s.size() || s[i] != '=') return over();
    std::string_view value = s.substr(i + 1);
    if (value.empty()) return over();
    size_t first = 0;
    while (first < value.size() && blank(value[first])) ++first;
    size_t last = value.size();
    while (last > first && blank(value[last - 1])) --last;
    const std::string v =
        first == value.size() ? std::string(" ") : std::string(value.substr(first, last - first));
    if (name != "syntax" && name != "escape" && name != "check") return over();
    if (!seen_.insert(name).second) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("the {} parser directive is given twice: keep one", name));
    }
    return std::optional<Directive>(Directive{name, v});
  }
  void end() { done_ = true; }

 private:
  Result<std::optional<Directive>> over() {
    done_ = true;
    return std::optional<Directive>();
  }
  bool done_ = false;
  std::set<std::string> seen_;
};

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    prev.swap(cur);
  }
  return prev[b.size()];
}

constexpr Keyword kAllKeywords[] = {
    Keyword::kFrom,       Keyword::kArg,    Keyword::kRun,    Keyword::kCmd,
    Keyword::kEntrypoint, Keyword::kShell,  Keyword::kEnv,    Keyword::kLabel,
    Keyword::kMaintainer, Keyword::kExpose, Keyword::kCopy,   Keyword::kAdd,
    Keyword::kWorkdir,    Keyword::kUser,   Keyword::kVolume, Keyword::kStopSignal,
    Keyword::kHealthcheck};

Error unknownInstruction(int line, std::string_view word) {
  std::string message = fmt::format("unknown instruction '{}'", shown(word));
  if (word.size() <= 20) {
    const std::string upper_word = [&] {
      std::string u(word);
      for (char& c : u) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      }
      return u;
    }();
    size_t best = 3;
    std::string_view suggestion;
    for (Keyword k : kAllKeywords) {
      const size_t d = editDistance(upper_word, keywordName(k));
      if (d < best) {
        best = d;
        suggestion = keywordName(k);
      }
    }
    if (!suggestion.empty()) {
      message += fmt::format(" (did you mean {}?)", suggestion);
    } else {
      message +=
          " (instructions are FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, CMD, "
          "ENTRYPOINT, EXPOSE, LABEL, VOLUME, SHELL, STOPSIGNAL, HEALTHCHECK)";
    }
  }
  return Error(Errc::kInvalidArgument, fmt::format("Dockerfile line {}: {}", line, message));
}

class Parser {
 public:
  explicit Parser(std::vector<std::string_view> lines) : lines_(std::move(lines)) {}

  Result<Dockerfile> run() {
    size_t count = 0;
    while (next_ < lines_.size()) {
      const int start = static_cast<int>(next_) + 1;
      const std::string_view content = trimLeft(trimNewline(lines_[next_++]));
      auto directive = directives_.parse(content);
      if (!directive) return fail(atLine(start, directive.error()));
      if (*directive) {
        HUTCH_TRY_VOID(apply(start, **directive));
        continue;
      }
      if (isComment(content)) continue;
      auto [piece, end] = trimContinuation(content, df_.escape);
      if (end && piece.empty()) continue;
      std::string joined(piece);
      int last = start;
      while (!end && next_ < lines_.size()) {
        const std::string_view line = trimNewline(lines_[next_++]);
        last = static_cast<int>(next_);
        if (isComment(line) || trimLeft(line).empty()) continue;
        std::tie(piece, end) = trimContinuation(line, df_.escape);
        joined.append(piece);
      }
      if (++count > kMaxInstructions) {
        return invalidAt(start, fmt::format("the Dockerfile has more than {} instructions; split "
                                            "the build into several images",
                                            kMaxInstructions));
      }
      HUTCH_TRY_VOID(instruction(joined, start, last));
    }
    if (df_.stages.empty()) {
      return fail(Errc::kInvalidArgument,
                  count == 0 ? "The Dockerfile has no instructions: start it with FROM <image>"
                             : "The Dockerfile has no FROM instruction: start the build with "
                               "FROM <image> (only ARG may come before it)");
    }
    HUTCH_TRY_VOID(checkCopyFrom());
    return std::move(df_);
  }

 private:
  Result<> apply(int line, const Directives::Directive& d) {
    if (d.name == "escape") {
      if (d.value != "\\" && d.value != "`") {
        return invalidAt(line, fmt::format("the escape directive takes \\ or ` (backtick), not "
                                           "'{}'",
                                           shown(d.value)));
      }
      df_.escape = d.value[0];
    } else if (d.name == "syntax") {
      df_.syntax = d.value;
    }
    return ok();
  }

  Result<> instruction(const std::string& joined, int start, int last) {
    const InstructionLine line = detail::splitInstructionLine(joined, df_.escape);
    const std::optional<Keyword> keyword = detail::keywordOf(line.keyword);
    if (!keyword) {
      if (lower(line.keyword) == "onbuild") {
        return fail(Errc::kUnsupported,
                    fmt::format("Dockerfile line {}: ONBUILD is not supported by hutch builds "
                                "(it only acts in builds FROM this image): remove it, or put "
                                "its instruction in the Dockerfile that needs it",
                                start));
      }
      return fail(unknownInstruction(start, line.keyword));
    }
    if (df_.stages.empty() && *keyword != Keyword::kFrom && *keyword != Keyword::kArg) {
      return invalidAt(start, fmt::format("{} comes before the first FROM: a Dockerfile starts "
                                          "with FROM <image> (only ARG may come before it)",
                                          keywordName(*keyword)));
    }
    std::vector<Heredoc> heredocs;
    if ((*keyword == Keyword::kRun || *keyword == Keyword::kCopy || *keyword == Keyword::kAdd) &&
        joined.find("<<") != std::string::npos) {
      auto json = detail::parseJsonArray(line.rest);
      if (!json) return fail(atLine(start, json.error()));
      if (!*json) {
        auto markers = detail::heredocMarkers(joined);
        if (!markers) return fail(atLine(start, markers.error()));
        for (Heredoc& h : *markers) {
          HUTCH_TRY_VOID(readBody(h, start, last));
          heredocs.push_back(std::move(h));
        }
      }
    }
    detail::PayloadContext context;
    context.escape = df_.escape;
    context.stages = &df_.stages;
    auto payload = detail::parsePayload(*keyword, line, std::move(heredocs), context);
    if (!payload) return fail(atLine(start, payload.error()));

    Instruction ins;
    ins.keyword = *keyword;
    ins.line = start;
    ins.end_line = last;
    size_t b = 0, e = joined.size();
    while (b < e && isSpace(joined[b])) ++b;
    while (e > b && isSpace(joined[e - 1])) --e;
    ins.original = joined.substr(b, e - b);
    ins.payload = std::move(*payload);

    if (*keyword == Keyword::kFrom) {
      Stage stage;
      stage.index = df_.stages.size();
      stage.name = std::get<From>(ins.payload).name;
      if (!stage.name.empty()) {
        auto [it, inserted] = stage_lines_.emplace(stage.name, start);
        if (!inserted) {
          return invalidAt(start, fmt::format("the stage name '{}' is already used on line {}: "
                                              "stage names must be unique",
                                              stage.name, it->second));
        }
      }
      stage.from = std::move(ins);
      df_.stages.push_back(std::move(stage));
    } else if (df_.stages.empty()) {
      df_.global_args.push_back(std::move(ins));
    } else {
      df_.stages.back().instructions.push_back(std::move(ins));
    }
    return ok();
  }

  // The lines after the instruction up to the delimiter line, with their line endings.
  Result<> readBody(Heredoc& h, int start, int& last) {
    std::string body;
    while (next_ < lines_.size()) {
      const std::string_view raw = lines_[next_++];
      last = static_cast<int>(next_);
      std::string_view candidate = trimNewline(raw);
      if (h.chomp) {
        while (!candidate.empty() && candidate.front() == '\t') candidate.remove_prefix(1);
      }
      if (candidate == h.name) {
        h.content = std::move(body);
        return ok();
      }
      body.append(raw);
    }
    return invalidAt(start, fmt::format("the heredoc <<{} is not terminated: end it with a line "
                                        "holding only {}",
                                        shown(h.name), shown(h.name)));
  }

  // COPY --from that named no earlier stage: a later stage (refused: stages build in order) or
  // an image, which must then be a valid reference.
  Result<> checkCopyFrom() {
    for (const Stage& stage : df_.stages) {
      for (const Instruction& ins : stage.instructions) {
        const Copy* copy = ins.as<Copy>();
        if (copy == nullptr || copy->from.empty() || copy->from_stage) continue;
        if (auto later = detail::findStageIn(df_.stages, copy->from, df_.stages.size())) {
          return invalidAt(ins.line,
                           fmt::format("COPY --from={} names stage {} ('{}'), which is this stage "
                                       "or a later one: stages can copy only from earlier "
                                       "stages, so move it above",
                                       shown(copy->from), *later, df_.stages[*later].name));
        }
        auto ref = image::parseReference(copy->from);
        if (!ref) {
          return invalidAt(ins.line, fmt::format("COPY --from={} is neither an earlier stage nor "
                                                 "an image: {}",
                                                 shown(copy->from), ref.error().message()));
        }
      }
    }
    return ok();
  }

  std::vector<std::string_view> lines_;
  size_t next_ = 0;
  Directives directives_;
  Dockerfile df_;
  std::unordered_map<std::string, int> stage_lines_;  // stage name -> its FROM line
};

}  // namespace

namespace detail {

std::optional<size_t> findStageIn(const std::vector<Stage>& stages, std::string_view name,
                                  size_t before) {
  before = std::min(before, stages.size());
  if (name.empty()) return std::nullopt;
  if (std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (name.size() > 9) return std::nullopt;
    const size_t index = std::stoul(std::string(name));
    if (index < before) return index;
    return std::nullopt;
  }
  const std::string l = lower(name);
  for (size_t k = 0; k < before; ++k) {
    if (stages[k].name == l) return k;
  }
  return std::nullopt;
}

}  // namespace detail

std::string_view keywordName(Keyword keyword) {
  switch (keyword) {
    case Keyword::kFrom: return "FROM";
    case Keyword::kArg: return "ARG";
    case Keyword::kRun: return "RUN";
    case Keyword::kCmd: return "CMD";
    case Keyword::kEntrypoint: return "ENTRYPOINT";
    case Keyword::kShell: return "SHELL";
    case Keyword::kEnv: return "ENV";
    case Keyword::kLabel: return "LABEL";
    case Keyword::kMaintainer: return "MAINTAINER";
    case Keyword::kExpose: return "EXPOSE";
    case Keyword::kCopy: return "COPY";
    case Keyword::kAdd: return "ADD";
    case Keyword::kWorkdir: return "WORKDIR";
    case Keyword::kUser: return "USER";
    case Keyword::kVolume: return "VOLUME";
    case Keyword::kStopSignal: return "STOPSIGNAL";
    case Keyword::kHealthcheck: return "HEALTHCHECK";
  }
  return "?";
}

bool expandsVariables(Keyword keyword) {
  return std::find(std::begin(kExpandedKeywords), std::end(kExpandedKeywords), keyword) !=
         std::end(kExpandedKeywords);
}

std::optional<size_t> Dockerfile::findStage(std::string_view name, size_t before) const {
  return detail::findStageIn(stages, name, before);
}

Result<Dockerfile> parseDockerfile(std::string_view text) {
  if (text.size() > kMaxDockerfileBytes) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The Dockerfile is {} bytes, more than the {} a build accepts",
                            text.size(), kMaxDockerfileBytes));
  }
  std::vector<std::string_view> lines = splitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].size() > kMaxLineBytes) {
      return invalidAt(static_cast<int>(i) + 1,
                       fmt::format("the line is longer than {} bytes (Docker's limit too): split "
                                   "it with line continuations",
                                   kMaxLineBytes));
    }
  }
  if (!lines.empty() && lines[0].starts_with("\xEF\xBB\xBF")) lines[0].remove_prefix(3);
  return Parser(std::move(lines)).run();
}

namespace detail {

Result<PortRange> parsePort(std::string_view word) {
  auto bad = [&](std::string_view why) {
    return fail(Errc::kInvalidArgument,
                fmt::format("'{}' is not a port to EXPOSE: {}; write 8000, 8000/udp or "
                            "8000-8010/tcp",
                            shown(word), why));
  };
  auto number = [](std::string_view s) -> std::optional<int> {
    if (s.empty() || s.size() > 5) return std::nullopt;
    int v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    if (v > 65535) return std::nullopt;
    return v;
  };
  if (word.find(':') != std::string_view::npos) {
    return bad("host addresses and ports are chosen when a box runs, not in the image");
  }
  const size_t slash = word.find('/');
  const std::string_view port = word.substr(0, slash);
  PortRange range;
  range.proto = slash == std::string_view::npos ? "tcp" : lower(word.substr(slash + 1));
  if (range.proto != "tcp" && range.proto != "udp" && range.proto != "sctp") {
    return bad("the protocol must be tcp, udp or sctp");
  }
  const size_t dash = port.find('-');
  const std::string_view first = port.substr(0, dash);
  const std::string_view second = dash == std::string_view::npos ? first : port.substr(dash + 1);
  const auto lo = number(first);
  const auto hi = number(second);
  if (!lo || !hi) return bad("a port is a number from 0 to 65535");
  if (*hi < *lo) return bad("the range ends before it starts");
  range.first = *lo;
  range.last = *hi;
  return range;
}

}  // namespace detail

Result<std::vector<std::string>> normalizePorts(const std::vector<std::string>& words) {
  constexpr size_t kMaxPorts = size_t{1} << 20;
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  size_t generated = 0;
  for (const std::string& word : words) {
    HUTCH_TRY(detail::PortRange range, detail::parsePort(word));
    generated += static_cast<size_t>(range.last - range.first + 1);
    if (generated > kMaxPorts) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("EXPOSE lists more than {} ports: list fewer", kMaxPorts));
    }
    for (int p = range.first; p <= range.last; ++p) {
      std::string spec = fmt::format("{}/{}", p, range.proto);
      if (seen.insert(spec).second) out.push_back(std::move(spec));
    }
  }
  return out;
}

}  // namespace hutch::build

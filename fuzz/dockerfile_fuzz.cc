// The front end of `hutch template build -f Dockerfile CONTEXT` (src/build/): what a user's
// Dockerfile, .dockerignore and COPY lines feed. The first byte picks the parser:
//   0 a Dockerfile, then every raw word it keeps expanded as the build engine will
//   1 a word expanded with variables taken from the input, and the escaping round trip
//   2 a .dockerignore, then the paths after a "\0" line matched against it
//   3 COPY sources (lines) and a destination resolved against a fixed context listing
//   4 a glob pattern of each dialect, matched against names
// Whatever parses must keep the promises of the headers (limits, stages, targets).
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "build/build_context.h"
#include "build/dockerfile.h"
#include "build/dockerignore.h"
#include "build/glob.h"
#include "build/word_expansion.h"
#include "fuzz_input.h"

namespace {

using namespace hutch::build;

void check(bool ok) {
  if (!ok) std::abort();
}

std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

const std::map<std::string, std::string, std::less<>> kEnv = {
    {"HOME", "/root"},         {"EMPTY", ""},     {"V", "foo bar baz"},
    {"PORT", "8000-8002/udp"}, {"DOTS", "1.2.3"},
};

std::optional<std::string> lookup(std::string_view name) {
  auto it = kEnv.find(name);
  if (it == kEnv.end()) return std::nullopt;
  return it->second;
}

// Expands a raw word; the result (when there is one) keeps the size limit.
void expandRaw(std::string_view word, char escape) {
  auto one = expandWord(word, lookup, escape);
  auto many = expandWords(word, lookup, escape);
  check(one.has_value() == many.has_value());
  if (one) check(one->size() <= kMaxExpandedBytes);
}

size_t payloadIndexOf(Keyword k) {
  switch (k) {
    case Keyword::kFrom: return 0;
    case Keyword::kArg: return 1;
    case Keyword::kRun: return 2;
    case Keyword::kCmd: return 3;
    case Keyword::kEntrypoint: return 4;
    case Keyword::kShell: return 5;
    case Keyword::kEnv: return 6;
    case Keyword::kLabel:
    case Keyword::kMaintainer: return 7;
    case Keyword::kExpose: return 8;
    case Keyword::kCopy:
    case Keyword::kAdd: return 9;
    case Keyword::kWorkdir: return 10;
    case Keyword::kUser: return 11;
    case Keyword::kVolume: return 12;
    case Keyword::kStopSignal: return 13;
    case Keyword::kHealthcheck: return 14;
  }
  return 99;
}

void checkInstruction(const Instruction& ins, int& last_line, char escape) {
  check(ins.line > last_line && ins.end_line >= ins.line);
  last_line = ins.end_line;
  check(ins.payload.index() == payloadIndexOf(ins.keyword));
  if (const auto* env = ins.as<Env>()) {
    check(!env->pairs.empty());
    for (const KeyValue& kv : env->pairs) {
      check(!kv.key.empty());
      expandRaw(kv.key, escape);
      expandRaw(kv.value, escape);
    }
  } else if (const auto* label = ins.as<Label>()) {
    for (const KeyValue& kv : label->pairs) expandRaw(kv.value, escape);
    if (ins.keyword == Keyword::kMaintainer) {
      // MAINTAINER's text comes back exactly.
      auto text = expandWord(label->pairs.at(0).value, lookup, escape);
      check(text.has_value());
    }
  } else if (const auto* arg = ins.as<Arg>()) {
    check(!arg->args.empty());
    for (const ArgDecl& a : arg->args) {
      check(!a.name.empty());
      if (a.default_value) expandRaw(*a.default_value, escape);
    }
  } else if (const auto* copy = ins.as<Copy>()) {
    check(!copy->sources.empty() || !copy->inline_files.empty());
    check(copy->is_add == (ins.keyword == Keyword::kAdd));
    for (const std::string& s : copy->sources) expandRaw(s, escape);
    expandRaw(copy->dest, escape);
    for (const Heredoc& h : copy->inline_files) {
      if (h.expand) {
        auto body = expandHeredoc(h.content, lookup);
        if (body) check(body->size() <= kMaxExpandedBytes);
      }
    }
  } else if (const auto* run = ins.as<Run>()) {
    check(run->command.json_form ? !run->command.argv.empty() : true);
    check(!run->executable_script || run->command.shell.starts_with("#!"));
  } else if (const auto* expose = ins.as<Expose>()) {
    for (const std::string& p : expose->ports) {
      auto words = expandWords(p, lookup, escape);
      if (words) (void)normalizePorts(*words);
    }
  } else if (const auto* shell = ins.as<Shell>()) {
    check(!shell->argv.empty());
  } else if (const auto* volume = ins.as<Volume>()) {
    check(!volume->paths.empty());
    for (const std::string& p : volume->paths) check(!p.empty());
  } else if (const auto* hc = ins.as<Healthcheck>()) {
    check(!hc->test.empty());
    check(hc->retries >= 0 && hc->interval_ns >= 0 && hc->timeout_ns >= 0);
  } else if (const auto* w = ins.as<Workdir>()) {
    check(!w->path.empty());
    expandRaw(w->path, escape);
  } else if (const auto* u = ins.as<User>()) {
    expandRaw(u->user, escape);
  }
}

void dockerfile(std::string_view text) {
  auto df = parseDockerfile(text);
  if (!df) {
    check(!df.error().message().empty());
    return;
  }
  check(!df->stages.empty());
  check(df->escape == '\\' || df->escape == '`');
  int last_line = 0;
  size_t count = 0;
  for (const Instruction& ins : df->global_args) {
    check(ins.keyword == Keyword::kArg);
    checkInstruction(ins, last_line, df->escape);
    ++count;
  }
  for (size_t i = 0; i < df->stages.size(); ++i) {
    const Stage& stage = df->stages[i];
    check(stage.index == i);
    check(stage.from.keyword == Keyword::kFrom);
    checkInstruction(stage.from, last_line, df->escape);
    check(stage.base().name == stage.name);
    check(!stage.base().image.empty());
    expandRaw(stage.base().image, df->escape);
    if (!stage.name.empty()) check(df->findStage(stage.name, df->stages.size()) == i);
    ++count;
    for (const Instruction& ins : stage.instructions) {
      check(ins.keyword != Keyword::kFrom);
      checkInstruction(ins, last_line, df->escape);
      if (const auto* copy = ins.as<Copy>(); copy != nullptr && copy->from_stage) {
        check(*copy->from_stage < i);
      }
      ++count;
    }
  }
  check(count <= kMaxInstructions);
  // Parsing is a function of the text.
  auto again = parseDockerfile(text);
  check(again && *again == *df);
}

void expansion(hutch::fuzz::FuzzInput& input) {
  const char escape = input.byte() % 2 == 0 ? '\\' : '`';
  const std::string_view value = input.take(input.byte());
  const std::string_view word = input.rest();
  auto with_value = [&](std::string_view name) -> std::optional<std::string> {
    if (name == "X") return std::string(value);
    return lookup(name);
  };
  auto one = expandWord(word, with_value, escape);
  auto many = expandWords(word, with_value, escape);
  check(one.has_value() == many.has_value());
  if (one) check(one->size() <= kMaxExpandedBytes);
  if (many) {
    for (const std::string& w : *many) check(!w.empty());
  }
  (void)expandHeredoc(word, with_value);
  LexOptions raw;
  raw.raw_quotes = raw.raw_escapes = raw.skip_unset = true;
  (void)lexWord(word, nullptr, raw);
  // Every character escaped comes back as itself.
  std::string escaped;
  for (char c : word.substr(0, 4096)) {
    escaped.push_back(escape);
    escaped.push_back(c);
  }
  auto literal = expandWord(escaped, with_value, escape);
  check(literal && *literal == word.substr(0, 4096));
}

void dockerignore(std::string_view text) {
  const size_t split = text.find(std::string_view("\n\0\n", 3));
  const std::string_view patterns = text.substr(0, split);
  auto ignore = DockerIgnore::parse(patterns);
  if (!ignore) return;
  for (const auto& p : ignore->patterns()) check(!p.text.empty() && p.line > 0);
  if (split == std::string_view::npos) return;
  for (std::string_view path : lines(text.substr(split + 3))) {
    const std::string clean = cleanPath(path);
    if (clean == "." || clean.starts_with("/") || clean.starts_with("..")) continue;
    const bool whole = ignore->excludes(clean);
    DockerIgnore::MatchState state;
    size_t slash = clean.find('/');
    while (slash != std::string::npos) {
      DockerIgnore::MatchState next;
      ignore->excludes(std::string_view(clean).substr(0, slash), state, &next);
      state = std::move(next);
      slash = clean.find('/', slash + 1);
    }
    check(ignore->excludes(clean, state, nullptr) == whole);
  }
}

const std::vector<ContextEntry> kListing = {
    {"Dockerfile", ContextEntry::Type::kFile, 0644, 10, ""},
    {"app", ContextEntry::Type::kDirectory, 0755, 0, ""},
    {"app/lib", ContextEntry::Type::kDirectory, 0755, 0, ""},
    {"app/lib/up", ContextEntry::Type::kSymlink, 0777, 0, "../../.."},
    {"app/lib/x.py", ContextEntry::Type::kFile, 0644, 1, ""},
    {"app/main.py", ContextEntry::Type::kFile, 0644, 1, ""},
    {"arr[0].txt", ContextEntry::Type::kFile, 0644, 1, ""},
    {"link", ContextEntry::Type::kSymlink, 0777, 0, "app"},
    {"loop", ContextEntry::Type::kSymlink, 0777, 0, "loop/x"},
    {"self", ContextEntry::Type::kSymlink, 0777, 0, "."},
    {"tool.tar", ContextEntry::Type::kFile, 0644, 1, ""},
};

void copySources(hutch::fuzz::FuzzInput& input) {
  CopyOptions options;
  const uint8_t flags = input.byte();
  options.is_add = (flags & 1) != 0;
  if ((flags & 2) != 0) options.unpack = (flags & 4) != 0;
  options.inline_files = (flags >> 3) & 3;
  std::vector<std::string_view> parts = lines(input.rest());
  const std::string dest(parts.back());
  parts.pop_back();
  std::vector<std::string> sources(parts.begin(), parts.end());
  auto plan = resolveCopySources(kListing, sources, dest, options);
  if (!plan) return;
  if (!plan->dest_is_dir) check(plan->items.size() <= 1);
  for (const CopyItem& item : plan->items) {
    bool listed = false;
    for (const ContextEntry& e : kListing) listed = listed || e == item.entry;
    check(listed);
    check(plan->dest_is_dir != item.target.empty());
    check(item.target != ".." && !item.target.starts_with("../") &&
          item.target.find("/../") == std::string::npos);
    check(!item.archive_candidate || options.is_add);
  }
}

void globs(std::string_view text) {
  const size_t nl = text.find('\n');
  const std::string_view pattern = text.substr(0, nl);
  const std::string_view names = nl == std::string_view::npos ? "" : text.substr(nl + 1);
  for (auto syntax :
       {Glob::Syntax::kFilepath, Glob::Syntax::kDockerignore, Glob::Syntax::kShellParam}) {
    auto glob = Glob::compile(pattern, syntax);
    if (!glob) continue;
    if (glob->isLiteral()) check(glob->matches(glob->literal()));
    for (std::string_view name : lines(names)) {
      const bool whole = glob->matches(name);
      if (syntax == Glob::Syntax::kShellParam) {
        const std::vector<size_t> prefixes = glob->prefixMatches(name);
        const std::vector<size_t> suffixes = glob->suffixMatches(name);
        for (size_t i = 1; i < prefixes.size(); ++i) check(prefixes[i - 1] < prefixes[i]);
        for (size_t n : prefixes) check(n <= name.size());
        for (size_t n : suffixes) check(n <= name.size());
        // The whole name matches exactly when the longest prefix match is all of it.
        check(whole == (!prefixes.empty() && prefixes.back() == name.size()));
        check(whole == (!suffixes.empty() && suffixes.back() == name.size()));
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hutch::fuzz::FuzzInput input(data, size);
  switch (input.byte() % 5) {
    case 0: dockerfile(input.rest()); break;
    case 1: expansion(input); break;
    case 2: dockerignore(input.rest()); break;
    case 3: copySources(input); break;
    default: globs(input.rest()); break;
  }
  return 0;
}

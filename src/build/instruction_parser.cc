#include "build/instruction_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "base/check.h"

namespace hutch::build::detail {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}
std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// A user's text in a message: bounded.
std::string shown(std::string_view s) {
  if (s.size() <= 120) return std::string(s);
  return std::string(s.substr(0, 120)) + "...";
}

tl::unexpected<Error> invalid(std::string message) {
  return fail(Errc::kInvalidArgument, std::move(message));
}
tl::unexpected<Error> unsupported(std::string message) {
  return fail(Errc::kUnsupported, std::move(message));
}
// ---- flags ----

enum class FlagType { kBool, kString, kStrings };
struct FlagSpec {
  std::string_view name;
  FlagType type;
};

class FlagValues {
 public:
  bool has(std::string_view name) const { return values_.count(std::string(name)) != 0; }
  std::string get(std::string_view name) const {
    auto it = values_.find(std::string(name));
    return it == values_.end() || it->second.empty() ? std::string() : it->second.back();
  }
  std::optional<bool> boolean(std::string_view name) const {
    if (!has(name)) return std::nullopt;
    return get(name) == "true";
  }
  void add(const std::string& name, std::string value) {
    values_[name].push_back(std::move(value));
  }

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

Result<FlagValues> parseFlags(std::string_view keyword, const std::vector<std::string>& flags,
                              std::initializer_list<FlagSpec> specs) {
  FlagValues out;
  for (const std::string& flag : flags) {
    if (!flag.starts_with("--")) {
      return invalid(fmt::format("{} flags start with --: '{}'", keyword, shown(flag)));
    }
    const size_t eq = flag.find('=');
    const std::string name = flag.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const bool has_value = eq != std::string::npos;
    const std::string value = has_value ? flag.substr(eq + 1) : std::string();
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      if (specs.size() == 0) {
        return invalid(fmt::format("{} takes no flags (remove --{})", keyword, shown(name)));
      }
      std::string known;
      for (const FlagSpec& s : specs)
        known += (known.empty() ? "--" : ", --") + std::string(s.name);
      return invalid(
          fmt::format("{} has no flag --{} (its flags are {})", keyword, shown(name), known));
    }
    if (out.has(name) && spec->type != FlagType::kStrings) {
      return invalid(fmt::format("{} --{} is given twice", keyword, name));
    }
    switch (spec->type) {
      case FlagType::kBool: {
        if (has_value && value.empty()) {
          return invalid(fmt::format("{} --{} needs a value (true or false)", keyword, name));
        }
        const std::string v = lower(value);
        if (!v.empty() && v != "true" && v != "false") {
          return invalid(
              fmt::format("{} --{} takes true or false, not '{}'", keyword, name, shown(value)));
        }
        out.add(name, v == "false" ? "false" : "true");
        break;
      }
      case FlagType::kString:
      case FlagType::kStrings:
        if (!has_value) {
          return invalid(fmt::format("{} --{} needs a value (--{}=...)", keyword, name, name));
        }
        out.add(name, value);
        break;
    }
  }
  return out;
}

// ---- durations (Go's time.ParseDuration) ----

std::optional<int64_t> parseGoDuration(std::string_view s) {
  if (s.empty()) return std::nullopt;
  bool negative = false;
  if (s[0] == '-' || s[0] == '+') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return 0;
  if (s.empty()) return std::nullopt;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t total = 0;
  while (!s.empty()) {
    uint64_t whole = 0;
    size_t digits = 0;
    while (!s.empty() && s[0] >= '0' && s[0] <= '9') {
      const auto d = static_cast<uint64_t>(s[0] - '0');
      if (whole > (kMax - d) / 10) return std::nullopt;
      whole = whole * 10 + d;
      s.remove_prefix(1);
      ++digits;
    }
    uint64_t frac = 0;
    uint64_t scale = 1;
    size_t frac_digits = 0;
    if (!s.empty() && s[0] == '.') {
      s.remove_prefix(1);
      while (!s.empty() && s[0] >= '0' && s[0] <= '9') {
        if (scale < 1000000000000000000ull) {
          frac = frac * 10 + static_cast<uint64_t>(s[0] - '0');
          scale *= 10;
        }
        s.remove_prefix(1);
        ++frac_digits;
      }
    }
    if (digits == 0 && frac_digits == 0) return std::nullopt;
    size_t unit_len = 0;
    while (unit_len < s.size() && s[unit_len] != '.' && (s[unit_len] < '0' || s[unit_len] > '9')) {
      ++unit_len;
    }
    const std::string_view unit = s.substr(0, unit_len);
    s.remove_prefix(unit_len);
    uint64_t mult = 0;
    if (unit == "ns") {
      mult = 1;
    } else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") {
      mult = 1000;
    } else if (unit == "ms") {
      mult = 1000000;
    } else if (unit == "s") {
      mult = 1000000000;
    } else if (unit == "m") {
      mult = 60ull * 1000000000;
    } else if (unit == "h") {
      mult = 3600ull * 1000000000;
    } else {
      return std::nullopt;
    }
    if (whole > kMax / mult) return std::nullopt;
    const uint64_t part =
        whole * mult + static_cast<uint64_t>(static_cast<long double>(frac) * mult / scale);
    if (part > kMax - total) return std::nullopt;
    total += part;
  }
  const auto value = static_cast<int64_t>(total);
  return negative ? -value : value;
}

Result<int64_t> healthDuration(const FlagValues& flags, std::string_view name) {
  const std::string text = flags.get(name);
  if (text.empty()) return int64_t{0};
  auto d = parseGoDuration(text);
  if (!d) {
    return invalid(
        fmt::format("HEALTHCHECK --{}={} is not a duration (write it like 30s, 1m30s "
                    "or 500ms)",
                    name, shown(text)));
  }
  if (*d != 0 && *d < 1000000) {
    return invalid(fmt::format("HEALTHCHECK --{}={} is shorter than 1ms", name, shown(text)));
  }
  return *d;
}

// ---- the instructions ----

Result<> needArgs(std::string_view keyword, std::string_view rest, std::string_view usage) {
  if (rest.empty()) {
    return invalid(fmt::format("{} needs an argument: {}", keyword, usage));
  }
  return ok();
}

Result<Payload> parseFrom(const InstructionLine& line) {
  HUTCH_TRY(FlagValues flags, parseFlags("FROM", line.flags, {{"platform", FlagType::kString}}));
  const std::vector<std::string> words = fields(line.rest);
  From from;
  from.platform = flags.get("platform");
  if (words.size() == 1) {
    from.image = words[0];
    return from;
  }
  if (words.size() != 3 || lower(words[1]) != "as") {
    return invalid(
        fmt::format("FROM takes an image and optionally a stage name: FROM image "
                    "[AS name], not 'FROM {}'",
                    shown(line.rest)));
  }
  from.image = words[0];
  from.name = lower(words[2]);
  const std::string& n = from.name;
  bool valid = n[0] >= 'a' && n[0] <= 'z';
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')) {
      valid = false;
    }
  }
  if (!valid) {
    return invalid(
        fmt::format("'{}' is not a valid stage name: start it with a letter and use "
                    "letters, digits, '-', '_' and '.'",
                    shown(words[2])));
  }
  if (n == "scratch" || n == "context") {
    return invalid(fmt::format("'{}' is reserved and cannot name a stage: choose another name", n));
  }
  return from;
}

Result<Payload> parseArg(const InstructionLine& line, char escape) {
  HUTCH_TRY_VOID(parseFlags("ARG", line.flags, {}));
  HUTCH_TRY_VOID(needArgs("ARG", line.rest, "ARG NAME[=default] ..."));
  Arg arg;
  for (const std::string& word : quotedWords(line.rest, escape)) {
    ArgDecl decl;
    const size_t eq = word.find('=');
    if (eq == std::string::npos) {
      decl.name = word;
    } else {
      decl.name = word.substr(0, eq);
      decl.default_value = word.substr(eq + 1);
    }
    if (decl.name.empty()) return invalid("ARG names cannot be blank: write ARG NAME=value");
    arg.args.push_back(std::move(decl));
  }
  return arg;
}

// RUN, CMD, ENTRYPOINT: JSON array or the text.
Result<CommandLine> commandLine(const InstructionLine& line) {
  CommandLine cmd;
  HUTCH_TRY(auto json, parseJsonArray(line.rest));
  if (json) {
    cmd.json_form = true;
    cmd.argv = std::move(*json);
  } else {
    cmd.shell = line.rest;
  }
  return cmd;
}

Result<Payload> parseRun(const InstructionLine& line, std::vector<Heredoc> heredocs) {
  HUTCH_TRY(FlagValues flags, parseFlags("RUN", line.flags,
                                         {{"mount", FlagType::kStrings},
                                          {"network", FlagType::kString},
                                          {"security", FlagType::kString},
                                          {"device", FlagType::kStrings}}));
  if (flags.has("mount")) {
    return unsupported(
        "RUN --mount is not supported by hutch builds: COPY what the step needs into the image "
        "first (a cache directory can live in the image, or be cleaned in the same RUN)");
  }
  if (flags.has("network") && lower(flags.get("network")) != "default") {
    return unsupported(fmt::format(
        "RUN --network={} is not supported by hutch builds: steps use the build box's network; "
        "remove the flag",
        shown(flags.get("network"))));
  }
  if (flags.has("security") && lower(flags.get("security")) != "sandbox") {
    return unsupported(fmt::format(
        "RUN --security={} is not supported by hutch builds: steps run as in a normal box; "
        "remove the flag",
        shown(flags.get("security"))));
  }
  if (flags.has("device")) {
    return unsupported("RUN --device is not supported by hutch builds: remove the flag");
  }
  Run run;
  HUTCH_TRY(run.command, commandLine(line));
  if (run.command.json_form ? run.command.argv.empty() : run.command.shell.empty()) {
    return invalid("RUN needs a command: RUN <command> or RUN [\"executable\", \"arg\"]");
  }
  if (!heredocs.empty()) {
    auto alone = parseHeredocMarker(line.rest);
    if (alone && *alone) {
      // The command is one heredoc: its body is the script.
      const Heredoc& first = heredocs.front();
      run.command.shell = first.chomp ? chompHeredoc(first.content) : first.content;
      run.executable_script = run.command.shell.starts_with("#!");
    } else {
      // Anything else: the shell reads the bodies after the line, as a shell script would.
      std::string script = line.rest;
      for (const Heredoc& h : heredocs) script += "\n" + h.content + h.name;
      run.command.shell = std::move(script);
    }
    for (Heredoc& h : heredocs) {
      if (h.chomp) h.content = chompHeredoc(h.content);
    }
    run.heredocs = std::move(heredocs);
  }
  return run;
}

Result<Payload> parseCmdOrEntrypoint(Keyword keyword, const InstructionLine& line) {
  const std::string_view name = keywordName(keyword);
  HUTCH_TRY_VOID(parseFlags(name, line.flags, {}));
  HUTCH_TRY(CommandLine cmd, commandLine(line));
  if (!cmd.json_form && cmd.shell.empty()) {
    return invalid(
        fmt::format("{} needs a command: {} <command> or {} [\"executable\", "
                    "\"arg\"] ({} [] clears it)",
                    name, name, name, name));
  }
  if (keyword == Keyword::kCmd) return Cmd{std::move(cmd)};
  return Entrypoint{std::move(cmd)};
}

Result<Payload> parseShell(const InstructionLine& line) {
  HUTCH_TRY_VOID(parseFlags("SHELL", line.flags, {}));
  HUTCH_TRY(auto json, parseJsonArray(line.rest));
  if (!json) {
    if (line.rest.empty()) return invalid("SHELL needs a command: SHELL [\"/bin/bash\", \"-c\"]");
    return invalid(
        fmt::format("SHELL takes a JSON array: SHELL [\"/bin/bash\", \"-c\"], not 'SHELL {}'",
                    shown(line.rest)));
  }
  if (json->empty()) return invalid("SHELL needs a command: SHELL [\"/bin/bash\", \"-c\"]");
  return Shell{std::move(*json)};
}

// ENV and LABEL: `K=v K2="v 2"`, or the legacy `K v w`.
Result<std::vector<KeyValue>> nameValues(std::string_view keyword, const InstructionLine& line,
                                         char escape) {
  HUTCH_TRY_VOID(parseFlags(keyword, line.flags, {}));
  const std::vector<std::string> words = quotedWords(line.rest, escape);
  if (words.empty()) {
    return invalid(fmt::format("{} needs an argument: {} NAME=value ...", keyword, keyword));
  }
  std::vector<KeyValue> pairs;
  if (words[0].find('=') == std::string::npos) {
    const std::string_view rest = line.rest;
    size_t i = 0;
    while (i < rest.size() && !isFieldSpace(rest[i])) ++i;
    const size_t key_end = i;
    while (i < rest.size() && isFieldSpace(rest[i])) ++i;
    if (i >= rest.size()) {
      return invalid(fmt::format("{} {} has no value: write {} {}=value", keyword,
                                 shown(rest.substr(0, key_end)), keyword,
                                 shown(rest.substr(0, key_end))));
    }
    pairs.push_back({std::string(rest.substr(0, key_end)), std::string(rest.substr(i))});
    return pairs;
  }
  for (const std::string& word : words) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) {
      return invalid(
          fmt::format("{} takes NAME=value pairs, and '{}' has no '='", keyword, shown(word)));
    }
    if (eq == 0) {
      return invalid(fmt::format("{} names cannot be blank: '{}'", keyword, shown(word)));
    }
    pairs.push_back({word.substr(0, eq), word.substr(eq + 1)});
  }
  return pairs;
}

// MAINTAINER's text escaped so that expandWord returns it unchanged.
std::string escapedLiteral(std::string_view text, char escape) {
  std::string out;
  for (char c : text) {
    if (c == escape || c == '$' || c == '"' || c == '\'' || isSpace(c)) out.push_back(escape);
    out.push_back(c);
  }
  return out;
}

Result<Payload> parseExpose(const InstructionLine& line, char escape) {
  HUTCH_TRY_VOID(parseFlags("EXPOSE", line.flags, {}));
  Expose expose;
  expose.ports = fields(line.rest);
  if (expose.ports.empty()) return invalid("EXPOSE needs a port: EXPOSE 8000 8443/tcp 53/udp");
  for (const std::string& word : expose.ports) {
    if (word.find('$') != std::string::npos) continue;  // checked after expansion
    HUTCH_TRY(std::vector<std::string> words, expandWords(word, nullptr, escape));
    for (const std::string& w : words) HUTCH_TRY_VOID(parsePort(w));
  }
  return expose;
}

bool isRemoteSource(std::string_view src) {
  const std::string l = lower(src.substr(0, 10));
  return l.starts_with("http://") || l.starts_with("https://") || l.starts_with("git://") ||
         l.starts_with("ssh://") || l.starts_with("git@");
}

Result<Payload> parseCopy(Keyword keyword, const InstructionLine& line,
                          const std::vector<Heredoc>& heredocs, const PayloadContext& context) {
  const bool is_add = keyword == Keyword::kAdd;
  const std::string_view name = keywordName(keyword);
  FlagValues flags;
  if (is_add) {
    HUTCH_TRY(flags, parseFlags(name, line.flags,
                                {{"chown", FlagType::kString},
                                 {"chmod", FlagType::kString},
                                 {"link", FlagType::kBool},
                                 {"keep-git-dir", FlagType::kBool},
                                 {"checksum", FlagType::kString},
                                 {"unpack", FlagType::kBool},
                                 {"exclude", FlagType::kStrings}}));
    if (flags.has("checksum") || flags.has("keep-git-dir")) {
      return unsupported(fmt::format(
          "ADD --{} is not supported: it only applies to URL and Git sources, which hutch builds "
          "do not download (download them in a RUN step)",
          flags.has("checksum") ? "checksum" : "keep-git-dir"));
    }
  } else {
    HUTCH_TRY(flags, parseFlags(name, line.flags,
                                {{"chown", FlagType::kString},
                                 {"chmod", FlagType::kString},
                                 {"from", FlagType::kString},
                                 {"link", FlagType::kBool},
                                 {"parents", FlagType::kBool},
                                 {"exclude", FlagType::kStrings}}));
    if (flags.has("parents")) {
      return unsupported(
          "COPY --parents is not supported by hutch builds: copy each directory with its own "
          "COPY src/dir /dest/dir");
    }
  }
  if (flags.has("exclude")) {
    return unsupported(fmt::format(
        "{} --exclude is not supported by hutch builds: leave the files out with .dockerignore "
        "or copy the wanted paths one by one",
        name));
  }
  Copy copy;
  copy.is_add = is_add;
  copy.chown = flags.get("chown");
  copy.chmod = flags.get("chmod");
  copy.link = flags.boolean("link").value_or(false);
  if (is_add) copy.unpack = flags.boolean("unpack");

  HUTCH_TRY(auto json, parseJsonArray(line.rest));
  std::vector<std::string> args;
  if (json) {
    copy.json_form = true;
    args = std::move(*json);
  } else {
    args = fields(line.rest);
  }
  if (args.size() < 2) {
    return invalid(
        fmt::format("{} needs a source and a destination: {} <src>... <dest>", name, name));
  }
  copy.dest = args.back();
  args.pop_back();
  auto dest_heredoc = parseHeredocMarker(copy.dest);
  if (dest_heredoc && *dest_heredoc) {
    return invalid(
        fmt::format("{} cannot take a heredoc as its destination: write {} <<EOF "
                    "<dest>",
                    name, name));
  }
  for (std::string& src : args) {
    // As BuildKit's MustParseHeredoc: a word that cannot be read as a marker is a path.
    auto marker = parseHeredocMarker(src);
    if (marker && *marker) {
      Heredoc file = std::move(**marker);
      for (const Heredoc& h : heredocs) {
        if (h.name == file.name) file.content = h.content;
      }
      if (file.chomp) file.content = chompHeredoc(file.content);
      copy.inline_files.push_back(std::move(file));
      continue;
    }
    if (isRemoteSource(src)) {
      if (is_add) {
        return unsupported(fmt::format(
            "ADD {} is not supported: hutch builds do not download URL or Git sources; download "
            "it in a RUN step (curl, wget or git clone)",
            shown(src)));
      }
      return invalid(fmt::format(
          "COPY cannot take a URL or Git source ({}): download it in a RUN step", shown(src)));
    }
    copy.sources.push_back(std::move(src));
  }

  if (flags.has("from")) {
    copy.from = flags.get("from");
    if (copy.from.empty()) return invalid("COPY --from needs a stage name, index or image");
    auto plain = expandWord(copy.from, nullptr, context.escape);
    if (!plain || *plain != copy.from) {
      return invalid(fmt::format(
          "COPY --from={} uses variables or quotes, which --from does not expand: name a stage "
          "(FROM ${{IMAGE}} AS base, with a global ARG IMAGE) and copy from it",
          shown(copy.from)));
    }
    HUTCH_CHECK(context.stages != nullptr && !context.stages->empty());
    const size_t current = context.stages->size() - 1;
    copy.from_stage = findStageIn(*context.stages, copy.from, current);
    const bool numeric = std::all_of(copy.from.begin(), copy.from.end(),
                                     [](char c) { return c >= '0' && c <= '9'; });
    if (!copy.from_stage && numeric) {
      return invalid(fmt::format(
          "COPY --from={} names stage {}, but this is stage {}: copy only from earlier stages",
          shown(copy.from), shown(copy.from), current));
    }
  }
  return copy;
}

Result<Payload> parseSingle(Keyword keyword, const InstructionLine& line) {
  const std::string_view name = keywordName(keyword);
  HUTCH_TRY_VOID(parseFlags(name, line.flags, {}));
  switch (keyword) {
    case Keyword::kWorkdir:
      HUTCH_TRY_VOID(needArgs(name, line.rest, "WORKDIR /path"));
      return Workdir{line.rest};
    case Keyword::kUser:
      HUTCH_TRY_VOID(needArgs(name, line.rest, "USER name[:group] or USER uid[:gid]"));
      return User{line.rest};
    case Keyword::kStopSignal:
      HUTCH_TRY_VOID(needArgs(name, line.rest, "STOPSIGNAL SIGTERM"));
      return StopSignal{line.rest};
    default: return invalid(fmt::format("{} is not a single-argument instruction", name));
  }
}

Result<Payload> parseVolume(const InstructionLine& line) {
  HUTCH_TRY_VOID(parseFlags("VOLUME", line.flags, {}));
  HUTCH_TRY(auto json, parseJsonArray(line.rest));
  std::vector<std::string> paths = json ? std::move(*json) : fields(line.rest);
  if (paths.empty()) return invalid("VOLUME needs a path: VOLUME /data");
  Volume volume;
  for (const std::string& p : paths) {
    const std::string_view t = trim(p);
    if (t.empty()) return invalid("VOLUME paths cannot be empty strings");
    volume.paths.emplace_back(t);
  }
  return volume;
}

Result<Payload> parseHealthcheck(const InstructionLine& line) {
  HUTCH_TRY(FlagValues flags, parseFlags("HEALTHCHECK", line.flags,
                                         {{"interval", FlagType::kString},
                                          {"timeout", FlagType::kString},
                                          {"start-period", FlagType::kString},
                                          {"start-interval", FlagType::kString},
                                          {"retries", FlagType::kString}}));
  HUTCH_TRY_VOID(needArgs("HEALTHCHECK", line.rest, "HEALTHCHECK [options] CMD <command>"));
  Healthcheck hc;
  hc.raw = line.args_text;
  size_t sep = 0;
  while (sep < line.rest.size() && !isSpace(line.rest[sep])) ++sep;
  const std::string type = upper(line.rest.substr(0, sep));
  const std::string_view cmd = trim(std::string_view(line.rest).substr(sep));
  if (type == "NONE") {
    if (!cmd.empty()) return invalid("HEALTHCHECK NONE takes no arguments");
    hc.test = {"NONE"};
    return hc;
  }
  if (type != "CMD") {
    return invalid(fmt::format("HEALTHCHECK takes CMD <command> or NONE, not '{}'",
                               shown(line.rest.substr(0, sep))));
  }
  HUTCH_TRY(auto json, parseJsonArray(cmd));
  if (json) {
    if (json->empty()) return invalid("HEALTHCHECK CMD needs a command");
    hc.test = {"CMD"};
    hc.test.insert(hc.test.end(), json->begin(), json->end());
  } else {
    if (cmd.empty()) return invalid("HEALTHCHECK CMD needs a command");
    hc.test = {"CMD-SHELL", std::string(cmd)};
  }
  HUTCH_TRY(hc.interval_ns, healthDuration(flags, "interval"));
  HUTCH_TRY(hc.timeout_ns, healthDuration(flags, "timeout"));
  HUTCH_TRY(hc.start_period_ns, healthDuration(flags, "start-period"));
  HUTCH_TRY(hc.start_interval_ns, healthDuration(flags, "start-interval"));
  if (flags.has("retries")) {
    const std::string r = flags.get("retries");
    int64_t value = 0;
    bool ok_digits = !r.empty() && r.size() <= 10;
    for (char c : r) {
      if (c < '0' || c > '9') ok_digits = false;
    }
    if (ok_digits) value = std::stoll(r);
    if (!ok_digits || value > std::numeric_limits<int32_t>::max()) {
      return invalid(
          fmt::format("HEALTHCHECK --retries={} is not a number of retries (0 or more)", shown(r)));
    }
    hc.retries = static_cast<int>(value);
  }
  return hc;
}

}  // namespace

Result<Payload> parsePayload(Keyword keyword, const InstructionLine& line,
                             std::vector<Heredoc> heredocs, const PayloadContext& context) {
  switch (keyword) {
    case Keyword::kFrom: return parseFrom(line);
    case Keyword::kArg: return parseArg(line, context.escape);
    case Keyword::kRun: return parseRun(line, std::move(heredocs));
    case Keyword::kCmd:
    case Keyword::kEntrypoint: return parseCmdOrEntrypoint(keyword, line);
    case Keyword::kShell: return parseShell(line);
    case Keyword::kEnv: {
      HUTCH_TRY(auto pairs, nameValues("ENV", line, context.escape));
      return Env{std::move(pairs)};
    }
    case Keyword::kLabel: {
      HUTCH_TRY(auto pairs, nameValues("LABEL", line, context.escape));
      return Label{std::move(pairs)};
    }
    case Keyword::kMaintainer: {
      HUTCH_TRY_VOID(parseFlags("MAINTAINER", line.flags, {}));
      HUTCH_TRY_VOID(needArgs("MAINTAINER", line.rest, "MAINTAINER name <email>"));
      return Label{{{"maintainer", escapedLiteral(line.rest, context.escape)}}};
    }
    case Keyword::kExpose: return parseExpose(line, context.escape);
    case Keyword::kCopy:
    case Keyword::kAdd: return parseCopy(keyword, line, heredocs, context);
    case Keyword::kWorkdir:
    case Keyword::kUser:
    case Keyword::kStopSignal: return parseSingle(keyword, line);
    case Keyword::kVolume: return parseVolume(line);
    case Keyword::kHealthcheck: return parseHealthcheck(line);
  }
  return invalid("unknown instruction");
}

}  // namespace hutch::build::detail

// Dockerfiles as BuildKit reads them (moby/buildkit frontend/dockerfile/parser and instructions),
// turned into typed instructions for hutch's build engine (`hutch template build -f Dockerfile`).
// Pure: no I/O, and no variable expansion — the engine knows the base image's ENV and the ARG
// values, so it expands words itself with expandWord (word_expansion.h) right before each step.
//
// Read as Docker reads it:
//   - Parser directives on the first lines: `# escape=\` or `# escape=`` (backtick),
//     `# syntax=...` (kept in Dockerfile::syntax, otherwise ignored: hutch has one frontend),
//     `# check=...` (ignored). Any other line ends them; after that they are comments. A UTF-8
//     byte order mark is skipped.
//   - Comments: lines whose first non-blank character is '#', also between continuation lines.
//   - Continuations: a line whose last non-blank character is the escape character (not itself
//     escaped) goes on on the next line; the pieces are joined as they are (no newline, the next
//     line's indentation kept); comment and blank lines in between are skipped.
//   - Keywords in any case; flags (`--name=value`, quotes allowed) right after the keyword.
//   - RUN, CMD and ENTRYPOINT in exec form (a JSON array of strings) or shell form (the text);
//     SHELL in exec form only.
//   - Heredocs in shell-form RUN, COPY and ADD: `<<EOF`, `<<-EOF` (leading tabs of the body and
//     of the delimiter line removed), `<<"EOF"`/`<<'EOF'` (a COPY body is then not expanded),
//     several in one instruction; the body runs to a line holding only the delimiter.
//   - ARG instructions before the first FROM (global_args: the ARGs FROM lines may use), then
//     stages: `FROM [--platform=...] image [AS name]`.
//
// Refused, with a message "Dockerfile line N: ..." that says what to do instead:
//   kInvalidArgument: syntax errors (unknown instruction — with a suggestion for a misspelt
//     one —, a wrong number of arguments, unknown or duplicate flags, a JSON array that holds
//     something other than strings, SHELL not in JSON form, an unterminated heredoc, a repeated or
//     malformed directive, an invalid stage name or a repeated one, an instruction before the
//     first FROM other than ARG, COPY --from with a variable or naming a later stage, a malformed
//     EXPOSE port or HEALTHCHECK option); input over kMaxDockerfileBytes, a line over
//     kMaxLineBytes, more than kMaxInstructions instructions; no FROM at all.
//   kUnsupported: what a hutch build does not do: RUN --mount, --network (other than default),
//     --security=insecure, --device; ONBUILD; ADD of a URL or a Git repository (download it in a
//     RUN); ADD --checksum and --keep-git-dir (they only apply to those); COPY/ADD --exclude and
//     --parents.
//
// Words stay raw: every string field documented "raw" is as written, quotes and escapes
// included, and must go through expandWord(word, lookup, Dockerfile::escape) before use — even
// when it holds no variable, since that is also what removes the quotes (`ENV A="x y"` has the
// raw value `"x y"`). Command lines (RUN, CMD, ENTRYPOINT, SHELL, HEALTHCHECK) are never expanded
// by the builder: the shell does it when they run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "build/word_expansion.h"

namespace hutch::build {

inline constexpr size_t kMaxDockerfileBytes = size_t{1} << 20;
inline constexpr size_t kMaxLineBytes = size_t{64} << 10;
inline constexpr size_t kMaxInstructions = 10000;

enum class Keyword {
  kFrom,
  kArg,
  kRun,
  kCmd,
  kEntrypoint,
  kShell,
  kEnv,
  kLabel,
  kMaintainer,
  kExpose,
  kCopy,
  kAdd,
  kWorkdir,
  kUser,
  kVolume,
  kStopSignal,
  kHealthcheck,
};

// "RUN", "COPY", ... (upper case, as Docker prints them).
std::string_view keywordName(Keyword keyword);

// The instructions whose words the builder expands (Docker's list: ADD COPY ENV EXPOSE FROM LABEL
// STOPSIGNAL USER VOLUME WORKDIR, and ARG names and defaults; ONBUILD is refused here). FROM is
// expanded with the global ARGs only; the others with the stage's ARGs and ENV.
bool expandsVariables(Keyword keyword);
inline constexpr Keyword kExpandedKeywords[] = {
    Keyword::kAdd,    Keyword::kCopy,    Keyword::kEnv,  Keyword::kExpose,
    Keyword::kFrom,   Keyword::kLabel,   Keyword::kUser, Keyword::kStopSignal,
    Keyword::kVolume, Keyword::kWorkdir, Keyword::kArg};

// RUN, CMD and ENTRYPOINT arguments.
struct CommandLine {
  bool json_form = false;
  std::vector<std::string> argv;  // json_form: the array's strings (decoded JSON, not expanded)
  std::string shell;              // shell form: the text, run as SHELL + [text] (/bin/sh -c)
  bool operator==(const CommandLine&) const = default;
};

struct Heredoc {
  std::string name;     // the delimiter without quotes ("EOF"); the file name in COPY <<EOF
  std::string content;  // the body: every line with its newline; for <<- leading tabs removed
  bool chomp = false;   // written <<-
  bool expand = true;   // the delimiter was not quoted: a COPY/ADD body goes through
                        // expandHeredoc (RUN bodies never: the shell reads them)
  bool operator==(const Heredoc&) const = default;
};

struct From {
  std::string image;     // raw; "scratch" is the empty image; may name an earlier stage (the
                         // engine looks it up with findStage after expanding it)
  std::string platform;  // raw --platform, "" when not given
  std::string name;      // the AS name, lower case; "" when unnamed
  bool operator==(const From&) const = default;
};

struct ArgDecl {
  std::string name;                          // raw
  std::optional<std::string> default_value;  // raw; nullopt for `ARG NAME` (no '=')
  bool operator==(const ArgDecl&) const = default;
};
struct Arg {
  std::vector<ArgDecl> args;  // `ARG A B=2` declares two
  bool operator==(const Arg&) const = default;
};

// How the engine runs it:
//   exec form: command.argv as is.
//   shell form: SHELL (default /bin/sh -c) + [command.shell].
// Heredocs are already folded in, as BuildKit does:
//   `RUN <<EOF` alone: command.shell is the body (tabs removed for <<-). When the body starts
//     with "#!", Docker runs it as a program instead: executable_script is true, and the engine
//     writes command.shell to a file named heredocs[0].name (mode 0755) and executes that file
//     without the shell.
//   anything else (`RUN <<EOF bash`, `RUN cat <<A >a && cat <<B >b`): command.shell is the line
//     followed, for each heredoc, by "\n", its body as written and its delimiter, for the shell's
//     own heredoc handling.
struct Run {
  CommandLine command;
  std::vector<Heredoc> heredocs;  // as read, for logs
  bool executable_script = false;
  bool operator==(const Run&) const = default;
};

struct Cmd {
  CommandLine command;  // `CMD []` (json_form, no argv) clears the command
  bool operator==(const Cmd&) const = default;
};
struct Entrypoint {
  CommandLine command;  // `ENTRYPOINT []` clears the entrypoint
  bool operator==(const Entrypoint&) const = default;
};
struct Shell {
  std::vector<std::string> argv;  // at least one
  bool operator==(const Shell&) const = default;
};

struct KeyValue {
  std::string key;    // raw
  std::string value;  // raw
  bool operator==(const KeyValue&) const = default;
};
// `ENV K=v K2="v 2"` gives two pairs; the legacy `ENV K v w` one pair {K, "v w"}. Every value in
// one ENV is expanded with the variables as they were before it.
struct Env {
  std::vector<KeyValue> pairs;
  bool operator==(const Env&) const = default;
};
// LABEL; MAINTAINER x becomes Label {"maintainer", x} with x escaped so that expandWord gives
// the text back exactly as written (Docker sets the deprecated author field; a label is what
// image tools read today).
struct Label {
  std::vector<KeyValue> pairs;
  bool operator==(const Label&) const = default;
};

struct Expose {
  std::vector<std::string> ports;  // raw words: expandWords each, then normalizePorts
  bool operator==(const Expose&) const = default;
};

// COPY and ADD. Sources are paths in the build context (or in the --from stage or image),
// cleaned and resolved by resolveCopySources (build_context.h) after expansion; the destination
// is relative to WORKDIR unless absolute; a trailing '/' or several sources make it a directory.
struct Copy {
  bool is_add = false;
  std::vector<std::string> sources;   // raw; may hold Go filepath.Match wildcards
  std::vector<Heredoc> inline_files;  // `COPY <<EOF /dst`: a file named after the delimiter
                                      // with the body, mode 0644, copied like a source
  std::string dest;                   // raw
  bool json_form = false;
  std::string from;  // --from as written: "" for the build context, else a stage or an image
  std::optional<size_t> from_stage;  // set when --from names an earlier stage (name or index);
                                     // otherwise a non-empty `from` is an image reference
  std::string chown;                 // raw --chown, "" when not given
  std::string chmod;                 // raw --chmod (octal, or symbolic like u+x)
  bool link = false;                 // --link: accepted, no effect (no layer rebasing here)
  std::optional<bool> unpack;        // ADD --unpack; ADD unpacks local tar archives unless false
  bool operator==(const Copy&) const = default;
};

struct Workdir {
  std::string path;  // raw; relative paths are relative to the previous WORKDIR
  bool operator==(const Workdir&) const = default;
};
struct User {
  std::string user;  // raw: "name", "uid", "name:group", "uid:gid"
  bool operator==(const User&) const = default;
};
struct Volume {
  std::vector<std::string> paths;  // raw
  bool operator==(const Volume&) const = default;
};
struct StopSignal {
  std::string signal;  // raw: "SIGTERM", "9"
  bool operator==(const StopSignal&) const = default;
};

// HEALTHCHECK, checked and kept in the image config's terms.
struct Healthcheck {
  // ["NONE"], ["CMD", argv...] (exec form) or ["CMD-SHELL", command] (shell form).
  std::vector<std::string> test;
  // Nanoseconds; 0 means Docker's default. Written as Go durations ("30s", "1m30s", "500ms").
  int64_t interval_ns = 0;
  int64_t timeout_ns = 0;
  int64_t start_period_ns = 0;
  int64_t start_interval_ns = 0;
  int retries = 0;  // 0: the default
  std::string raw;  // the arguments as written
  bool operator==(const Healthcheck&) const = default;
};

using Payload = std::variant<From, Arg, Run, Cmd, Entrypoint, Shell, Env, Label, Expose, Copy,
                             Workdir, User, Volume, StopSignal, Healthcheck>;

struct Instruction {
  Keyword keyword = Keyword::kFrom;
  int line = 0;      // 1-based line where it starts
  int end_line = 0;  // its last line (continuations and heredoc bodies included)
  // The instruction as one line, for build logs: continuations joined, comment lines dropped,
  // heredoc bodies not included ("RUN apt-get update &&     apt-get install -y git").
  std::string original;
  Payload payload;

  template <class T>
  const T* as() const {
    return std::get_if<T>(&payload);
  }
  bool operator==(const Instruction&) const = default;
};

struct Stage {
  size_t index = 0;
  std::string name;                       // lower case; "" when unnamed
  Instruction from;                       // its payload is a From
  std::vector<Instruction> instructions;  // those after FROM, in order

  const From& base() const { return std::get<From>(from.payload); }
  bool operator==(const Stage&) const = default;
};

struct Dockerfile {
  char escape = '\\';                    // pass to expandWord
  std::string syntax;                    // the `# syntax=` directive, for logs; "" when absent
  std::vector<Instruction> global_args;  // ARG instructions before the first FROM
  std::vector<Stage> stages;             // at least one

  // The index of the stage among [0, before) named `name` (case-insensitive) or whose index
  // `name` is in decimal; nullopt when none. FROM and COPY --from refer to stages this way.
  std::optional<size_t> findStage(std::string_view name, size_t before) const;
  bool operator==(const Dockerfile&) const = default;
};

Result<Dockerfile> parseDockerfile(std::string_view text);

// EXPOSE arguments after expansion, normalized: "8000" -> "8000/tcp", "53/UDP" -> "53/udp",
// "8000-8002/tcp" -> three ports. kInvalidArgument naming the word for anything else (a port
// outside 0-65535, a protocol other than tcp, udp or sctp, a reversed range).
Result<std::vector<std::string>> normalizePorts(const std::vector<std::string>& words);

}  // namespace hutch::build

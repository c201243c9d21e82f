// .dockerignore: which paths of a build context the build does not see, with Docker's semantics
// (moby/patternmatcher and its ignorefile reader, as BuildKit's context transfer applies them).
//
// Reading, line by line:
//   - a UTF-8 byte order mark is skipped; a line starting with '#' (in the first column) is a
//     comment; blank lines are skipped; other lines are trimmed of surrounding white space;
//   - a leading '!' makes the pattern an exception (what it matches is included again);
//   - the pattern is cleaned like Go's filepath.Clean ("a//b/./c/" -> "a/b/c", "a/../b" -> "b",
//     "" -> ".") and one leading '/' is dropped: "/build" and "build" are the same.
// Matching (paths are relative to the context, '/'-separated, without "./"):
//   - a pattern is a Glob::kDockerignore: filepath.Match syntax plus "**" (glob.h);
//   - a pattern matches a path when it matches the path itself or any of its parent directories
//     ("node_modules" excludes "node_modules/a/b");
//   - the last pattern that matches decides: excluded, or included again by a '!' pattern.
//   "!" alone, and malformed patterns ("[a"), are errors naming the line.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "build/glob.h"

namespace hutch::build {

inline constexpr size_t kMaxDockerignoreBytes = size_t{1} << 20;
inline constexpr size_t kMaxDockerignorePatterns = 10000;

class DockerIgnore {
 public:
  struct Pattern {
    std::string text;  // cleaned, without the '!'
    bool exception = false;
    int line = 0;  // 1-based line in .dockerignore
  };

  // No patterns: nothing is excluded.
  DockerIgnore() = default;

  // kInvalidArgument (".dockerignore line N: ...") for a malformed pattern or a lone "!", and
  // for more than kMaxDockerignoreBytes or kMaxDockerignorePatterns.
  static Result<DockerIgnore> parse(std::string_view text);
  // <context_dir>/.dockerignore parsed; no patterns when there is no such file. kInternal when
  // it cannot be read.
  static Result<DockerIgnore> load(const std::filesystem::path& context_dir);

  // True when `path` (relative, '/'-separated, clean) is left out of the context.
  bool excludes(std::string_view path) const;

  // The same for a walk that visits parents first: `parent` is what this call returned in
  // `state` for the path's parent directory (empty for a top-level path), and `state`
  // receives this path's state for its children. Saves re-matching every parent.
  struct MatchState {
    std::vector<bool> matched;  // per pattern: matched this path or a parent
  };
  bool excludes(std::string_view path, const MatchState& parent, MatchState* state) const;

  // True when some pattern is an exception: an excluded directory may then hold included
  // paths, so a walk has to look inside it.
  bool hasExceptions() const { return has_exceptions_; }
  bool empty() const { return patterns_.empty(); }
  const std::vector<Pattern>& patterns() const { return patterns_; }

 private:
  std::vector<Pattern> patterns_;
  std::vector<Glob> globs_;
  bool has_exceptions_ = false;
};

// Go's filepath.Clean for '/'-separated paths.
std::string cleanPath(std::string_view path);

}  // namespace hutch::build

// Variable expansion in Dockerfile words, with the semantics of BuildKit's shell lexer
// (frontend/dockerfile/shell): what the builder does to the arguments of ADD, COPY, ENV, EXPOSE,
// FROM, LABEL, STOPSIGNAL, USER, VOLUME, WORKDIR and ARG before using them. RUN, CMD and
// ENTRYPOINT are not expanded by the builder: their shell does it.
//
//   $VAR ${VAR}          the value, "" when unset; "$" before anything else is literal
//   ${VAR:-word}         word when VAR is unset or empty, else the value
//   ${VAR-word}          word when VAR is unset, else the value (even empty)
//   ${VAR:+word}         word when VAR is set and not empty, else ""
//   ${VAR+word}          word when VAR is set (even empty), else ""
//   ${VAR:?msg} ${VAR?msg}  the value, or an error (msg, or "is not allowed to be unset/empty")
//   ${VAR#pat} ${VAR##pat}  the value without its shortest / longest prefix matching pat
//   ${VAR%pat} ${VAR%%pat}  the value without its shortest / longest suffix matching pat
//   ${VAR/pat/rep} ${VAR//pat/rep}  the first / every match of pat replaced (leftmost-longest)
//   'single'             literal, quotes removed; no escape inside
//   "double"             quotes removed; $ expands; escape + one of " $ escape is that character
//   <escape>c            c literally (the escape character is the Dockerfile's, '\' or '`')
//
// `word` may be any string, nested substitutions included. Patterns are Glob::kShellParam.
// Names are ASCII letters, digits and '_' ($1 and the special $@ $* $# $? $- $$ $! are looked up
// like any name: normally unset). Every call is bounded: at most kMaxExpandedBytes of output and
// kMaxSubstitutionDepth nested ${...}; errors are kInvalidArgument and quote the word.
//
// Variables are looked up through `lookup` (nullopt: unset). An instruction sees the values as
// they were before it: `ENV A=1 B=$A` sets B from the previous A, so build the lookup once per
// instruction, not per word.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::build {

using VariableLookup = std::function<std::optional<std::string>(std::string_view name)>;

inline constexpr size_t kMaxExpandedBytes = size_t{1} << 20;
inline constexpr int kMaxSubstitutionDepth = 32;

// One word: expansions done, quotes and escapes removed, spaces kept ("a b" stays one string).
// What the builder uses for COPY/ADD sources and destination, ENV and LABEL keys and values, ARG
// names and defaults, FROM, WORKDIR, USER, VOLUME and STOPSIGNAL.
Result<std::string> expandWord(std::string_view word, const VariableLookup& lookup,
                               char escape = '\\');

// The same, then split into words at unquoted white space (the result of an unquoted $VAR is
// split too, as a shell would). What the builder uses for each EXPOSE argument.
Result<std::vector<std::string>> expandWords(std::string_view word, const VariableLookup& lookup,
                                             char escape = '\\');

// A COPY/ADD heredoc body whose delimiter was not quoted (Heredoc::expand): $ expansions and
// '\' escapes are processed, quotes are ordinary characters.
Result<std::string> expandHeredoc(std::string_view content, const VariableLookup& lookup);

// The lexer with all of BuildKit's switches. The parser uses the raw ones to find heredoc
// delimiters in a line; the functions above are the interface for everyone else.
struct LexOptions {
  char escape = '\\';
  bool process_quotes = true;  // false: quotes are ordinary characters
  bool raw_quotes = false;     // keep quote characters in the result
  bool raw_escapes = false;    // keep escape characters in the result
  bool skip_unset = false;     // leave $X, ${X...} as written when X is unset
};
struct LexResult {
  std::string word;                // the whole, as expandWord
  std::vector<std::string> words;  // split, as expandWords
};
Result<LexResult> lexWord(std::string_view word, const VariableLookup& lookup,
                          const LexOptions& options);

}  // namespace hutch::build

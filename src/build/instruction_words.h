// The words of one Dockerfile instruction line as BuildKit's parser cuts them
// (frontend/dockerfile/parser: splitCommand, extractBuilderFlags, parseWords,
// parseStringsWhitespaceDelimited, parseJSON, the heredoc markers): the lexical layer under
// instruction_parser.h. Internal to src/build; never fails except where BuildKit does.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "build/dockerfile.h"

namespace hutch::build::detail {

// Go's unicode.IsSpace, ASCII part (BuildKit splits words with it).
inline bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
// BuildKit's reWhitespace: [\t\v\f\r ]
inline bool isFieldSpace(char c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

struct InstructionLine {
  std::string keyword;             // as written ("run")
  std::vector<std::string> flags;  // "--from=build": quotes removed, escapes processed
  std::string rest;                // the arguments after the flags, trimmed
  std::string args_text;           // everything after the keyword, flags included, trimmed
};

// Splits a joined logical line. Never fails (flag errors surface when the flags are parsed).
InstructionLine splitInstructionLine(std::string_view line, char escape);

// The keyword of `word` (any case); nullopt for an unknown word (and for ONBUILD, refused).
std::optional<Keyword> keywordOf(std::string_view word);

// `rest` as a JSON array of strings: nullopt when it is not JSON at all (shell form); an error
// when it is a JSON array holding something other than strings.
Result<std::optional<std::vector<std::string>>> parseJsonArray(std::string_view rest);

// Heredoc markers of a line as BuildKit finds them ("<<EOF", "<<-'EOF'", "2<<EOF"), bodies
// empty; an error for a marker whose delimiter cannot be read (an unclosed quote).
Result<std::vector<Heredoc>> heredocMarkers(std::string_view line);
// One word as a heredoc marker, or nullopt.
Result<std::optional<Heredoc>> parseHeredocMarker(std::string_view word);
// The body with the leading tabs of every line removed (<<-).
std::string chompHeredoc(std::string_view content);

// The words of `rest` split at runs of [\t\v\f\r ] (FROM, EXPOSE, COPY, ADD, VOLUME): quotes are
// not special here; each word is expanded later.
std::vector<std::string> fields(std::string_view rest);
// BuildKit's parseWords (ARG, ENV, LABEL): words at unquoted white space, with their quotes and
// escapes kept for the expansion that comes later.
std::vector<std::string> quotedWords(std::string_view rest, char escape);

}  // namespace hutch::build::detail

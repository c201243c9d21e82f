// How the CLI prints: tables for people, the API's own JSON objects with --json, errors on
// stderr with an exit code from the shared table.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace hutch::cli {

struct Output {
  bool json = false;
};

void printJson(const nlohmann::json& j);
void printTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows);
// Prints "hutch: <message>" (or {"error":...} with --json) and returns the exit code for it.
int reportError(const Output& out, const Error& error);
std::string humanAge(int64_t unix_seconds);
// Unix milliseconds as local "YYYY-MM-DD HH:MM:SS.mmm".
std::string clockTime(int64_t unix_ms);
// A query value: every byte but RFC 3986's unreserved ones as %XX.
std::string percentEncode(std::string_view text);

}  // namespace hutch::cli

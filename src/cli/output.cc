#include "cli/output.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "api/error_mapping.h"
#include "api/json_model.h"

namespace hutch::cli {

void printJson(const nlohmann::json& j) {
  fmt::print("{}\n", j.dump(2));
}

void printTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t i = 0; i < cells.size(); ++i) {
      text += i + 1 == cells.size() ? cells[i] : fmt::format("{:<{}}   ", cells[i], width[i]);
    }
    fmt::print("{}\n", text);
  };
  line(header);
  for (const auto& row : rows) line(row);
}

int reportError(const Output& out, const Error& error) {
  if (out.json) {
    fmt::print(stderr, "{}\n", api::errorJson(error).dump());
  } else {
    fmt::print(stderr, "hutch: {}\n", error.describe());
  }
  return api::cliExitCode(error.code());
}

std::string clockTime(int64_t unix_ms) {
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("{}.{:03d}", buf, static_cast<int>(unix_ms % 1000));
}

std::string humanAge(int64_t unix_seconds) {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  int64_t age = std::max<int64_t>(0, now - unix_seconds);
  if (age < 60) return fmt::format("{} seconds ago", age);
  if (age < 3600) return fmt::format("{} minutes ago", age / 60);
  if (age < 86400) return fmt::format("{} hours ago", age / 3600);
  return fmt::format("{} days ago", age / 86400);
}

std::string percentEncode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace hutch::cli

// hutch diff BOX [--from X] [--patch PATH] | hutch export BOX DIR (docs/cli.md "diff").
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>

#include "api/json_model.h"
#include "cli/commands/commands.h"
#include "cli/copy_plan.h"
#include "cli/tar_stream.h"

namespace hutch::cli {

using boost::beast::http::verb;

namespace {

std::string diffQuery(const DiffOptions& options) {
  std::string query;
  auto add = [&](std::string_view key, std::string_view value) {
    query += query.empty() ? "?" : "&";
    query += fmt::format("{}={}", key, percentEncode(value));
  };
  if (!options.from.empty()) add("from", options.from);
  if (options.all) add("all", "true");
  for (const auto& pattern : options.ignore) add("ignore", pattern);
  return query;
}

std::string letter(const std::string& change) {
  if (change == "added") return "A";
  if (change == "deleted") return "D";
  return "C";
}

std::string size(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", bytes / double(1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", bytes / double(1 << 20));
  if (bytes >= (uint64_t{1} << 10)) return fmt::format("{:.1f} KiB", bytes / double(1 << 10));
  return fmt::format("{} B", bytes);
}

std::string baseline(const nlohmann::json& from) {
  std::string kind = from.value("kind", "");
  if (kind == "checkpoint") return "checkpoint " + from.value("name", "");
  if (kind == "image") return "template " + from.value("name", "") + "'s image";
  return "template " + from.value("name", "");
}

int printPatch(const ApiClient& client, const Output& out, const std::string& box,
               const DiffOptions& options) {
  std::string target = "/v1/boxes/" + box + "/diff/patch?path=" + percentEncode(options.patch);
  if (!options.from.empty()) target += "&from=" + percentEncode(options.from);
  auto text = client.getText(target);
  if (!text) return reportError(out, text.error());
  if (out.json) {
    printJson({{"path", options.patch}, {"patch", *text}});
  } else {
    fmt::print("{}", *text);
  }
  return 0;
}

}  // namespace

int cmdDiff(const ApiClient& client, const Output& out, const std::string& box,
            const DiffOptions& options) {
  if (!options.patch.empty()) return printPatch(client, out, box, options);
  auto diffed = client.call(verb::get, "/v1/boxes/" + box + "/diff" + diffQuery(options));
  if (!diffed) return reportError(out, diffed.error());
  if (out.json) {
    printJson(*diffed);
    return 0;
  }
  const auto& changes = (*diffed)["changes"];
  if (options.short_format) {
    // docker diff's format.
    for (const auto& c : changes) {
      fmt::print("{} {}\n", letter(c.value("change", "")), c.value("path", ""));
    }
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  std::map<std::string, int> counts;
  for (const auto& c : changes) {
    std::string change = c.value("change", "");
    ++counts[change];
    std::string type = c.value("type", "");
    std::string what;
    if (c.contains("what")) {
      for (const auto& w : c["what"]) what += (what.empty() ? "" : ",") + w.get<std::string>();
    }
    std::string path = c.value("path", "");
    if (type == "dir") path += "/";
    if (type == "symlink") path += " -> " + c.value("symlink_target", "");
    rows.push_back({letter(change), type, path,
                    type == "file" && change != "deleted" ? size(c.value("size", uint64_t{0})) : "",
                    change == "deleted" ? "" : fmt::format("{:04o}", c.value("mode", 0)), what});
  }
  if (!rows.empty()) printTable({"", "TYPE", "PATH", "SIZE", "MODE", "CHANGED"}, rows);
  std::string hidden;
  uint64_t hidden_total = 0;
  for (const auto& [rule, n] : (*diffed)["hidden"].items()) {
    hidden += fmt::format("{}{} {}", hidden.empty() ? "" : ", ", rule, n.get<uint64_t>());
    hidden_total += n.get<uint64_t>();
  }
  fmt::print("{} added, {} changed, {} deleted since {}", counts["added"], counts["changed"],
             counts["deleted"], baseline((*diffed)["from"]));
  if (hidden_total > 0) fmt::print("; {} hidden ({}; --all shows them)", hidden_total, hidden);
  fmt::print("\n");
  if (diffed->value("truncated", false)) {
    fmt::print("(only the first {} of {} are listed)\n", changes.size(),
               diffed->value("total", uint64_t{0}));
  }
  return 0;
}

int cmdExport(const ApiClient& client, const Output& out, const std::string& box,
              const std::string& dir, const DiffOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return reportError(
        out,
        Error(Errc::kNotFound, dir + " is not a directory: make it first (mkdir -p " + dir + ")"));
  }
  auto answer =
      client.exchange(verb::get, "/v1/boxes/" + box + "/diff/export" + diffQuery(options), {}, "");
  if (!answer) return reportError(out, answer.error());
  if (answer->status != 200)
    return reportError(out, api::errorFromResponse(answer->status, answer->body));
  // The archive, held in memory, unpacked from a memfd with the same checks as hutch cp.
  UniqueFd fd(::memfd_create("hutch-export", MFD_CLOEXEC));
  if (!fd) return reportError(out, sysError("memfd_create", errno));
  std::string_view left = answer->body;
  while (!left.empty()) {
    ssize_t n = ::write(fd.get(), left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return reportError(out, sysError("write", errno));
    left.remove_prefix(static_cast<size_t>(n));
  }
  ::lseek(fd.get(), 0, SEEK_SET);
  CopyPlan plan{.source_dir = "/", .source_name = ".", .target_dir = dir, .target_name = "."};
  size_t warnings = 0;
  TarCallbacks callbacks{.on_bytes = {}, .on_warning = [&](const std::string& warning) {
                           ++warnings;
                           fmt::print(stderr, "hutch: {}\n", warning);
                         }};
  if (auto extracted = extractTar(plan, fd.get(), false, callbacks); !extracted) {
    return reportError(out, extracted.error().withContext("Cannot unpack the export into " + dir));
  }
  if (out.json) {
    printJson({{"box", box}, {"dir", dir}, {"bytes", answer->body.size()}, {"warnings", warnings}});
  } else {
    fmt::print("exported what changed in {} into {} ({})\n", box, dir, size(answer->body.size()));
  }
  return 0;
}

}  // namespace hutch::cli

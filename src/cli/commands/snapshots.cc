// hutch fork | checkpoint [create|ls|rm] | rollback | df
#include <fmt/format.h>

#include "api/json_model.h"
#include "cli/commands/commands.h"

namespace hutch::cli {

using boost::beast::http::verb;

namespace {

std::string humanBytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.1f}G", bytes / double(1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f}M", bytes / double(1 << 20));
  return fmt::format("{}K", (bytes + 1023) >> 10);
}

std::string boxPath(const std::string& box) {
  return "/v1/boxes/" + box;
}

}  // namespace

int cmdFork(const ApiClient& client, const Output& out, const std::string& box,
            const ForkOptions& options) {
  nlohmann::json body{{"count", options.count}};
  if (!options.name.empty()) {
    if (options.count != 1) {
      return reportError(out, Error(Errc::kInvalidArgument,
                                    "--name names one box; with -n N leave it out and the "
                                    "children get generated names"));
    }
    body["names"] = {options.name};
  }
  auto forked = client.call(verb::post, boxPath(box) + "/fork", body);
  if (!forked) return reportError(out, forked.error());
  if (out.json) {
    printJson((*forked)["boxes"]);
    return 0;
  }
  for (const auto& child : (*forked)["boxes"]) fmt::print("{}\n", child.value("name", ""));
  return 0;
}

int cmdCheckpoint(const ApiClient& client, const Output& out, const std::string& box,
                  const std::string& name) {
  nlohmann::json body = nlohmann::json::object();
  if (!name.empty()) body["name"] = name;
  auto made = client.call(verb::post, boxPath(box) + "/checkpoints", body);
  if (!made) return reportError(out, made.error());
  if (out.json) {
    printJson(*made);
  } else {
    fmt::print("{}\n", made->value("name", ""));
  }
  return 0;
}

int cmdCheckpointList(const ApiClient& client, const Output& out, const std::string& box) {
  auto listed = client.call(verb::get, boxPath(box) + "/checkpoints");
  if (!listed) return reportError(out, listed.error());
  if (out.json) {
    printJson((*listed)["checkpoints"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : (*listed)["checkpoints"]) {
    rows.push_back({c.value("name", ""), c.value("id", ""),
                    humanBytes(c.value("size_bytes", uint64_t{0})),
                    humanAge(c.value("created_at", int64_t{0}))});
  }
  printTable({"NAME", "ID", "SIZE", "CREATED"}, rows);
  return 0;
}

int cmdCheckpointRemove(const ApiClient& client, const Output& out, const std::string& box,
                        const std::vector<std::string>& names) {
  int code = 0;
  for (const auto& name : names) {
    auto res = client.call(verb::delete_, boxPath(box) + "/checkpoints/" + name);
    if (!res) {
      code = reportError(out, res.error());
      continue;
    }
    if (!out.json) fmt::print("{}\n", name);
  }
  return code;
}

int cmdRollback(const ApiClient& client, const Output& out, const std::string& box,
                const std::string& checkpoint) {
  auto rolled = client.call(verb::post, boxPath(box) + "/rollback",
                            nlohmann::json{{"checkpoint", checkpoint}});
  if (!rolled) return reportError(out, rolled.error());
  if (out.json) {
    printJson(*rolled);
  } else {
    fmt::print("{}\n", rolled->value("name", ""));
  }
  return 0;
}

int cmdDiskUsage(const ApiClient& client, const Output& out) {
  auto usage = client.call(verb::get, "/v1/system/df");
  if (!usage) return reportError(out, usage.error());
  if (out.json) {
    printJson(*usage);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, label] : std::vector<std::pair<std::string, std::string>>{
           {"templates", "Templates"},
           {"template_snapshots", "Template snapshots"},
           {"checkpoints", "Checkpoints"},
           {"layers", "Shared disk layers"},
           {"boxes", "Boxes"}}) {
    const auto& line = (*usage)[key];
    rows.push_back({label, std::to_string(line.value("count", uint64_t{0})),
                    humanBytes(line.value("bytes", uint64_t{0}))});
  }
  printTable({"TYPE", "COUNT", "SIZE"}, rows);
  return 0;
}

int cmdPool(const ApiClient& client, const Output& out) {
  auto pools = client.call(verb::get, "/v1/system/pool");
  if (!pools) return reportError(out, pools.error());
  if (out.json) {
    printJson(*pools);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& pool : (*pools)["pools"]) {
    rows.push_back(
        {pool.value("template", ""), std::to_string(pool.value("cpus", 0)),
         std::to_string(pool.value("memory_mib", uint64_t{0})) + " MiB",
         fmt::format("{}/{}", pool.value("ready", uint64_t{0}), pool.value("size", uint64_t{0})),
         pool.value("filling", false) ? "refilling" : ""});
  }
  printTable({"TEMPLATE", "CPUS", "MEMORY", "READY", ""}, rows);
  return 0;
}

}  // namespace hutch::cli

// hutch stats: what running boxes' VMMs use of the host, from their cgroups.
#include <fmt/format.h>

#include "cli/commands/commands.h"

namespace hutch::cli {

using boost::beast::http::verb;

namespace {

std::string mib(uint64_t bytes) {
  return fmt::format("{:.1f}MiB", static_cast<double>(bytes) / double(1 << 20));
}

// "blkio.bfq.weight=100", or "-" where the kernel gives the box no I/O weight.
std::string ioWeights(const nlohmann::json& weights) {
  std::string out;
  if (weights.is_object()) {
    for (const auto& [file, weight] : weights.items()) {
      out += (out.empty() ? "" : " ") + file + "=" + weight.dump();
    }
  }
  return out.empty() ? "-" : out;
}

}  // namespace

int cmdStats(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes) {
  nlohmann::json all = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows;
  int code = 0;
  for (const auto& name : boxes) {
    auto got = client.call(verb::get, "/v1/boxes/" + name + "/stats");
    if (!got) {
      code = reportError(out, got.error());
      continue;
    }
    const auto& memory = (*got)["memory"];
    const auto& pids = (*got)["pids"];
    uint64_t max = memory.value("max_bytes", uint64_t{0});
    rows.push_back(
        {got->value("name", name), std::to_string(got->value("uid", int64_t{-1})),
         mib(memory.value("bytes", uint64_t{0})) + " / " + (max == 0 ? std::string("-") : mib(max)),
         mib(memory.value("peak_bytes", uint64_t{0})),
         fmt::format("{:.1f}s", static_cast<double>(got->value("cpu_ns", uint64_t{0})) / 1e9),
         fmt::format("{} / {}", pids.value("current", uint64_t{0}), pids.value("max", uint64_t{0})),
         std::to_string(got->value("oom_kills", uint64_t{0})),
         ioWeights(got->value("io_weights", nlohmann::json::object()))});
    all.push_back(*got);
  }
  if (out.json) {
    if (!all.empty()) printJson(all);
  } else if (!rows.empty()) {
    printTable(
        {"NAME", "UID", "MEMORY / LIMIT", "PEAK", "CPU", "TASKS / MAX", "OOM KILLS", "IO WEIGHT"},
        rows);
  }
  return code;
}

}  // namespace hutch::cli

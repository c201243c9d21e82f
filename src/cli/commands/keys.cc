// hutch key create NAME [--admin] [--max-*] | ls | rm NAME: the API keys of a hutchd's TCP
// listener (docs/api.md "Keys"). The secret of a new key is printed once.
#include <fmt/format.h>

#include "cli/commands/commands.h"

namespace hutch::cli {

using boost::beast::http::verb;

namespace {

std::string limit(const nlohmann::json& k, const char* field, const char* unit = "") {
  uint64_t v = k.value(field, uint64_t{0});
  return v == 0 ? std::string("-") : fmt::format("{}{}", v, unit);
}

}  // namespace

int cmdKeyCreate(const ApiClient& client, const Output& out, const KeyOptions& options) {
  nlohmann::json body{{"name", options.name}, {"admin", options.admin}};
  if (options.max_boxes) body["max_boxes"] = options.max_boxes;
  if (options.max_cpus) body["max_cpus"] = options.max_cpus;
  for (auto [text, field] : {std::pair{&options.max_memory, "max_memory_mib"},
                             std::pair{&options.max_disk, "max_disk_mib"}}) {
    if (text->empty()) continue;
    auto mib = parseMemoryMib(*text);
    if (!mib) return reportError(out, mib.error());
    body[field] = *mib;
  }
  auto made = client.call(verb::post, "/v1/keys", body);
  if (!made) return reportError(out, made.error());
  if (out.json) {
    printJson(*made);
    return 0;
  }
  fmt::print("{}\n", (*made)["key"].get<std::string>());
  fmt::print(stderr, "Key {} made{}. This is the only time it is shown: keep it (HUTCH_API_KEY).\n",
             options.name, options.admin ? " (admin)" : "");
  return 0;
}

int cmdKeyList(const ApiClient& client, const Output& out) {
  auto listed = client.call(verb::get, "/v1/keys");
  if (!listed) return reportError(out, listed.error());
  if (out.json) {
    printJson((*listed)["keys"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : (*listed)["keys"]) {
    int64_t used = k.value("last_used_at", int64_t{0});
    rows.push_back({k.value("name", ""), k.value("admin", false) ? "yes" : "no",
                    limit(k, "max_boxes"), limit(k, "max_cpus"), limit(k, "max_memory_mib", "M"),
                    limit(k, "max_disk_mib", "M"), humanAge(k.value("created_at", int64_t{0})),
                    used == 0 ? std::string("never") : humanAge(used)});
  }
  printTable({"NAME", "ADMIN", "BOXES", "CPUS", "MEMORY", "DISK", "CREATED", "LAST USED"}, rows);
  return 0;
}

int removeEach(const ApiClient& client, const Output& out, std::string_view collection,
               const std::vector<std::string>& names) {
  int code = 0;
  for (const auto& name : names) {
    auto res = client.call(verb::delete_, fmt::format("{}/{}", collection, percentEncode(name)));
    if (!res) {
      code = reportError(out, res.error());
      continue;
    }
    if (!out.json) fmt::print("{}\n", name);
  }
  return code;
}

int cmdKeyRemove(const ApiClient& client, const Output& out,
                 const std::vector<std::string>& names) {
  return removeEach(client, out, "/v1/keys", names);
}

}  // namespace hutch::cli

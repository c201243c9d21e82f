// hutch template ls | build NAME | create --from BOX|--from-image REF|--from-archive FILE NAME |
// rm NAME;
// hutch image prune
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "api/json_model.h"
#include "cli/commands/commands.h"

namespace hutch::cli {

using boost::beast::http::verb;

int cmdTemplateList(const ApiClient& client, const Output& out) {
  auto listed = client.call(verb::get, "/v1/templates");
  if (!listed) return reportError(out, listed.error());
  if (out.json) {
    printJson((*listed)["templates"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : (*listed)["templates"]) {
    std::string source = t.value("source", "");
    if (source == "box") source += ":" + t.value("source_box", "");
    rows.push_back({t.value("name", ""), source,
                    fmt::format("{}M", t.value("disk_bytes", uint64_t{0}) >> 20),
                    t.value("kernel_version", ""),
                    t.contains("used_by") ? std::to_string(t["used_by"].size()) : "-",
                    t.value("created", "")});
  }
  printTable({"NAME", "SOURCE", "DISK", "KERNEL", "BOXES", "CREATED"}, rows);
  return 0;
}

int cmdTemplateCreate(const ApiClient& client, const Output& out, const std::string& name,
                      const TemplateSource& from) {
  const std::string& from_box = from.box;
  nlohmann::json body{{"name", name}};
  if (!from_box.empty()) body["from_box"] = from_box;
  if (!from.image.empty()) body["from_image"] = from.image;
  if (from.systemd && from.archive.empty()) body["systemd"] = true;
  Result<nlohmann::json> made = nlohmann::json();
  if (from_box.empty()) {
    if (!out.json && !from.archive.empty()) {
      fmt::print(stderr, "Making template {} from the archive {}\n", name,
                 from.archive == "-" ? "on stdin" : from.archive);
    } else if (!out.json && from.image.empty()) {
      fmt::print(stderr, "Building template {} (the first build of a recipe takes minutes)\n",
                 name);
    } else if (!out.json) {
      fmt::print(stderr, "Making template {} from image {}\n", name, from.image);
    }
    TemplateStream stream(out);
    auto on_line = [&stream](const nlohmann::json& line) { stream.onLine(line); };
    auto streamed = from.archive.empty()
                        ? client.streamLines(verb::post, "/v1/templates", body, on_line)
                        : sendTemplateArchive(client, out, name, from, on_line);
    made = stream.result(streamed);
    if (!made) return reportError(out, made.error());
  } else {
    if (!out.json)
      fmt::print(stderr, "Freezing the disk of box {} as template {}\n", from_box, name);
    made = client.call(verb::post, "/v1/templates", body);
    if (!made) return reportError(out, made.error());
  }
  if (out.json) {
    printJson(*made);
  } else {
    fmt::print("{}\n", name);
  }
  return 0;
}

void TemplateStream::onLine(const nlohmann::json& line) {
  if (line.contains("progress") && line["progress"].is_string()) {
    if (!out_.json) fmt::print(stderr, "  {}\n", line["progress"].get<std::string>());
  } else if (line.contains("template")) {
    made_ = line["template"];
  } else if (line.contains("error")) {
    failed_ = api::errorFromResponse(500, line.dump());
  }
}

Result<nlohmann::json> TemplateStream::result(const Result<>& streamed) const {
  if (!streamed) return fail(streamed.error());
  if (failed_) return fail(*failed_);
  if (made_.is_null()) return fail(Errc::kProtocol, "hutchd ended the build without a result");
  return made_;
}

int cmdImagePrune(const ApiClient& client, const Output& out, bool dry_run,
                  const std::string& keep) {
  nlohmann::json body{{"dry_run", dry_run}};
  if (!keep.empty()) {
    auto ms = parseDurationMs(keep, "--keep");
    if (!ms) return reportError(out, ms.error());
    body["keep_s"] = *ms / 1000;
  }
  auto pruned = client.call(verb::post, "/v1/images/prune", body);
  if (!pruned) return reportError(out, pruned.error());
  if (out.json) {
    printJson(*pruned);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& image : (*pruned)["images"]) {
    const bool kept = image.value("kept", true);
    rows.push_back({std::filesystem::path(image.value("dir", "")).filename().string(),
                    fmt::format("{}M", image.value("bytes", uint64_t{0}) >> 20),
                    kept ? "kept" : (dry_run ? "would remove" : "removed"),
                    image.value("reason", "")});
  }
  printTable({"BUILD", "DISK", "", "WHY"}, rows);
  // The pulled images (hutch template create --from-image/--from-archive) and their blobs.
  const auto& pulled = (*pruned).value("pulled_images", nlohmann::json::array());
  if (!pulled.empty()) {
    std::vector<std::vector<std::string>> images;
    for (const auto& image : pulled) {
      const bool kept = image.value("kept", true);
      images.push_back({image.value("digest", "").substr(0, 19),
                        kept ? "kept" : (dry_run ? "would remove" : "removed"),
                        image.value("reason", "")});
    }
    fmt::print("\n");
    printTable({"PULLED IMAGE", "", "WHY"}, images);
  }
  if (const auto& blobs = (*pruned).value("blobs", nlohmann::json::object()); !blobs.empty()) {
    fmt::print("Blobs: {} {}, {} kept{}\n", blobs.value("removed", uint64_t{0}),
               dry_run ? "would be removed" : "removed", blobs.value("kept", uint64_t{0}),
               blobs.contains("reason") ? " (" + blobs.value("reason", "") + ")" : "");
  }
  if (const auto& roots = (*pruned).value("root_disks", nlohmann::json::object()); !roots.empty()) {
    fmt::print("Root disks kept for the next create of an image: {} {}, {} kept\n",
               roots.value("removed", uint64_t{0}), dry_run ? "would be removed" : "removed",
               roots.value("kept", uint64_t{0}));
  }
  fmt::print("{} {} MiB\n", dry_run ? "Would free" : "Freed",
             (*pruned).value("freed_bytes", uint64_t{0}) >> 20);
  return 0;
}

namespace {

// A registry is a host and port, a path segment of the API: a URL or a path is refused here.
Result<> checkRegistryName(const std::string& registry) {
  if (registry.empty() || registry.find('/') != std::string::npos) {
    return fail(Errc::kInvalidArgument,
                "Give the registry as HOST[:PORT] (registry.example:5000, docker.io), not '" +
                    registry + "'");
  }
  return ok();
}

}  // namespace

int cmdRegistryLogin(const ApiClient& client, const Output& out, const std::string& registry,
                     const std::string& username) {
  if (auto valid = checkRegistryName(registry); !valid) return reportError(out, valid.error());
  if (::isatty(STDIN_FILENO)) {
    fmt::print(stderr, "Password or token for {} at {} (then Enter): ", username, registry);
  }
  std::string password;
  std::getline(std::cin, password);
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
    password.pop_back();
  }
  auto kept = client.call(verb::put, "/v1/registries/" + registry,
                          nlohmann::json{{"username", username}, {"password", password}});
  if (!kept) return reportError(out, kept.error());
  if (out.json) {
    printJson(*kept);
  } else {
    fmt::print("Login kept for {}\n", (*kept).value("registry", registry));
  }
  return 0;
}

int cmdRegistryLogout(const ApiClient& client, const Output& out, const std::string& registry) {
  if (auto valid = checkRegistryName(registry); !valid) return reportError(out, valid.error());
  auto removed = client.call(verb::delete_, "/v1/registries/" + registry);
  if (!removed) return reportError(out, removed.error());
  if (out.json) {
    printJson(*removed);
  } else {
    fmt::print("{}\n", (*removed).value("removed", registry));
  }
  return 0;
}

int cmdRegistryList(const ApiClient& client, const Output& out) {
  auto listed = client.call(verb::get, "/v1/registries");
  if (!listed) return reportError(out, listed.error());
  if (out.json) {
    printJson((*listed)["registries"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : (*listed)["registries"]) {
    rows.push_back({r.value("registry", ""), r.value("username", "")});
  }
  printTable({"REGISTRY", "USERNAME"}, rows);
  return 0;
}

int cmdTemplateRemove(const ApiClient& client, const Output& out,
                      const std::vector<std::string>& names) {
  return removeEach(client, out, "/v1/templates", names);
}

}  // namespace hutch::cli

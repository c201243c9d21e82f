#include "e2b/template_registry.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace hutch::e2b {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json toJson(const E2bTemplate& t) {
  json tags = json::object();
  for (const auto& [name, tag] : t.tags) {
    tags[name] = {{"build_id", tag.build_id},
                  {"hutch_template", tag.hutch_template},
                  {"created_at", tag.created_at},
                  {"user", tag.user},
                  {"workdir", tag.workdir}};
  }
  return {{"id", t.id},
          {"name", t.name},
          {"owner_id", t.owner_id},
          {"owner_name", t.owner_name},
          {"created_at", t.created_at},
          {"updated_at", t.updated_at},
          {"cpus", t.cpus},
          {"memory_mib", t.memory_mib},
          {"build_count", t.build_count},
          {"public", t.is_public},
          {"tags", tags}};
}

E2bTemplate fromJson(const json& j) {
  E2bTemplate t;
  t.id = j.value("id", "");
  t.name = j.value("name", "");
  t.owner_id = j.value("owner_id", "");
  t.owner_name = j.value("owner_name", "");
  t.created_at = j.value("created_at", int64_t{0});
  t.updated_at = j.value("updated_at", int64_t{0});
  t.cpus = j.value("cpus", 2u);
  t.memory_mib = j.value("memory_mib", uint64_t{1024});
  t.build_count = j.value("build_count", uint64_t{0});
  t.is_public = j.value("public", false);
  const json tags = j.value("tags", json::object());
  for (const auto& [name, tag] : tags.items()) {
    t.tags[name] = {tag.value("build_id", ""), tag.value("hutch_template", ""),
                    tag.value("created_at", int64_t{0}), tag.value("user", ""),
                    tag.value("workdir", "")};
  }
  return t;
}

}  // namespace

std::vector<std::string> E2bTemplate::hutchTemplates() const {
  std::vector<std::string> out;
  for (const auto& [_, tag] : tags) {
    if (std::find(out.begin(), out.end(), tag.hutch_template) == out.end()) {
      out.push_back(tag.hutch_template);
    }
  }
  return out;
}

Result<TemplateRegistry> TemplateRegistry::open(fs::path file) {
  TemplateRegistry r(std::move(file));
  std::ifstream in(r.file_);
  if (!in) return r;
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  auto bad = [&] {
    return fail(Errc::kInternal,
                fmt::format("{} is not the E2B template list hutchd writes; move it away to "
                            "start with none (E2B templates built before are then unknown)",
                            r.file_.string()));
  };
  if (!j.is_object() || !j.contains("templates") || !j["templates"].is_array()) return bad();
  try {
    for (const json& t : j["templates"]) {
      if (!t.is_object()) continue;
      E2bTemplate e = fromJson(t);
      if (!e.id.empty()) r.templates_[e.id] = std::move(e);
    }
  } catch (const json::exception&) {
    return bad();
  }
  return r;
}

std::optional<E2bTemplate> TemplateRegistry::byId(const std::string& id) const {
  auto it = templates_.find(id);
  if (it == templates_.end()) return std::nullopt;
  return it->second;
}

std::optional<E2bTemplate> TemplateRegistry::byName(const std::string& name) const {
  for (const auto& [_, t] : templates_) {
    if (t.name == name) return t;
  }
  return std::nullopt;
}

std::optional<E2bTemplate> TemplateRegistry::find(const std::string& id_or_name) const {
  if (auto t = byId(id_or_name)) return t;
  return byName(id_or_name);
}

std::vector<E2bTemplate> TemplateRegistry::all() const {
  std::vector<E2bTemplate> out;
  for (const auto& [_, t] : templates_) out.push_back(t);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.created_at, a.id) < std::tie(b.created_at, b.id);
  });
  return out;
}

Result<> TemplateRegistry::put(const E2bTemplate& t) {
  auto before = templates_;
  templates_[t.id] = t;
  auto saved = save();
  if (!saved) templates_ = std::move(before);
  return saved;
}

Result<> TemplateRegistry::remove(const std::string& id) {
  auto before = templates_;
  templates_.erase(id);
  auto saved = save();
  if (!saved) templates_ = std::move(before);
  return saved;
}

Result<> TemplateRegistry::save() const {
  json list = json::array();
  for (const auto& [_, t] : templates_) list.push_back(toJson(t));
  const std::string text = json{{"version", 1}, {"templates", list}}.dump(2) + "\n";
  std::error_code ec;
  fs::create_directories(file_.parent_path(), ec);
  const std::string tmp = file_.string() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail(Errc::kInternal, fmt::format("Cannot create {}", tmp), errno);
  bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  written = ::fsync(fd) == 0 && written;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), file_.c_str()) != 0) {
    return fail(Errc::kInternal, fmt::format("Cannot write {}", file_.string()), errno);
  }
  return ok();
}

}  // namespace hutch::e2b

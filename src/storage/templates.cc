#include "storage/templates.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace hutch::storage {

Result<Template> TemplateStore::find(const std::string& name) const {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::canonical(dir_ / name, ec);
  if (ec) {
    return fail(Errc::kNotFound, fmt::format("No template '{}' in {}; build it with "
                                             "scripts/build-image.sh --recipe images/{} --out {}",
                                             name, dir_.string(), name, (dir_ / name).string()));
  }
  Template t{name, dir, dir / "vmlinux", dir / "initrd.img", dir / "rootfs.img", "", {}};
  for (const auto& file : {t.kernel, t.initrd, t.rootfs}) {
    if (!std::filesystem::exists(file)) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("Template '{}' is incomplete: {} is missing; rebuild it", name,
                              file.string()));
    }
  }
  std::ifstream manifest(dir / "manifest.json");
  if (manifest) {
    auto j = nlohmann::json::parse(manifest, nullptr, false);
    if (j.is_object()) {
      t.image_key = j.value("image_key", "");
      t.manifest = std::move(j);
    }
  }
  return t;
}

std::vector<std::string> TemplateStore::names() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (find(entry.path().filename().string())) out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<> TemplateStore::remove(const std::string& name) const {
  std::filesystem::path entry = dir_ / name;
  std::error_code ec;
  if (!std::filesystem::is_symlink(entry, ec) && !std::filesystem::exists(entry, ec)) {
    return fail(Errc::kNotFound, fmt::format("No template '{}'", name));
  }
  std::filesystem::remove(entry, ec);  // a symlink: the cached build stays in the cache
  if (ec)
    return fail(Errc::kInternal, fmt::format("Cannot remove {}: {}", entry.string(), ec.message()));
  return ok();
}

Result<> TemplateStore::link(const std::string& name,
                             const std::filesystem::path& image_dir) const {
  std::filesystem::path tmp = dir_ / ("." + name + ".tmp");
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  std::filesystem::create_directory_symlink(image_dir, tmp, ec);
  if (!ec) std::filesystem::rename(tmp, dir_ / name, ec);
  if (ec)
    return fail(Errc::kInternal, fmt::format("Cannot link template {}: {}", name, ec.message()));
  return ok();
}

}  // namespace hutch::storage

// Templates: read-only guest images (kernel, initramfs, root filesystem) under
// <state>/templates/<name>/, made by scripts/build-image.sh (--out points here).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::storage {

struct Template {
  std::string name;
  std::filesystem::path dir;  // resolved (symlinks followed), so boxes pin one build
  std::filesystem::path kernel;
  std::filesystem::path initrd;
  std::filesystem::path rootfs;
  std::string image_key;    // from manifest.json, identifies the build
  nlohmann::json manifest;  // manifest.json as written by the builder (or by create --from)
};

class TemplateStore {
 public:
  explicit TemplateStore(std::filesystem::path dir) : dir_(std::move(dir)) {}
  Result<Template> find(const std::string& name) const;
  std::vector<std::string> names() const;
  // Removes the name (a symlink to a build in the image cache, or a directory hutch made).
  Result<> remove(const std::string& name) const;
  // Points `name` at `image_dir` (atomically replacing an older link of that name).
  Result<> link(const std::string& name, const std::filesystem::path& image_dir) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace hutch::storage

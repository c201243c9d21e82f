// Templates: read-only guest images (kernel, initramfs, root filesystem) under
// <state>/templates/<name>/, made by scripts/build-image.sh (--out points here).
#pragma once

#include <filesystem>
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
  std::string image_key;  // from manifest.json, identifies the build
};

class TemplateStore {
 public:
  explicit TemplateStore(std::filesystem::path dir) : dir_(std::move(dir)) {}
  Result<Template> find(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace hutch::storage

// What boxes of an image template take from the image's config (issue 32): the environment
// (merged into the box's at create), the user and the working directory of an exec or a file
// operation whose request names none. docs/templates.md, "Images".
#include <spdlog/spdlog.h>

#include <fstream>

#include "box/box_service.h"

namespace hutch::box {

using nlohmann::json;

BoxService::ExecDefaults BoxService::execDefaults(const std::string& key) {
  ExecDefaults defaults{.user = config_.default_user, .cwd = {}};
  auto box = store_.find(key);
  if (!box || box->image_dir.empty()) return defaults;
  auto it = image_defaults_.find(box->image_dir);
  if (it == image_defaults_.end()) {
    std::ifstream in(std::filesystem::path(box->image_dir) / "manifest.json");
    json manifest = json::parse(in, nullptr, false);
    json found = manifest.is_object() && manifest.value("defaults", json()).is_object()
                     ? manifest["defaults"]
                     : json();
    it = image_defaults_.emplace(box->image_dir, std::move(found)).first;
  }
  const json& image = it->second;
  if (!image.is_object()) return defaults;
  // As `docker run` does: the image's USER, else root (an image need not have hutch's user).
  std::string user = image.value("user", "");
  defaults.user = user.empty() ? "root" : user;
  defaults.cwd = image.value("workdir", "");
  return defaults;
}

BoxEnv imageEnvironment(const nlohmann::json& manifest, const BoxEnv& requested) {
  BoxEnv env;
  if (manifest.is_object() && manifest.value("defaults", json()).is_object()) {
    const json defaults = manifest.value("defaults", json::object());
    for (const json& entry : defaults.value("env", json::array())) {
      if (!entry.is_string()) continue;
      const std::string kv = entry.get<std::string>();
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) continue;
      BoxEnv one{{kv.substr(0, eq), kv.substr(eq + 1)}};
      // A name the box's environment cannot carry is left out (and said), not an error.
      if (validateEnv(one)) {
        env.insert(one.begin(), one.end());
      } else {
        spdlog::warn("The image's environment variable {} is not a valid name; left out",
                     kv.substr(0, eq));
      }
    }
  }
  for (const auto& [k, v] : requested) env[k] = v;
  return env;
}

}  // namespace hutch::box

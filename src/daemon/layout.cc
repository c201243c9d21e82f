#include "daemon/layout.h"

#include <system_error>

namespace hutch::daemon {

Layout installedLayout(const std::filesystem::path& prefix) {
  const std::filesystem::path libexec = prefix / "libexec" / "hutch";
  const std::filesystem::path share = prefix / "share" / "hutch";
  return Layout{.recipes = (share / "images").string(),
                .builder = (share / "scripts" / "build-image.sh").string(),
                .agent = (libexec / "hutch-agent").string(),
                .ui_dir = (share / "ui").string(),
                .jail = (libexec / "hutch-jail").string(),
                .egress = (libexec / "hutch-egress").string(),
                .diff = (libexec / "hutch-diff").string()};
}

Layout defaultLayout(const std::filesystem::path& exe, const Layout& build_tree) {
  if (exe.empty() || !exe.has_parent_path()) return build_tree;
  const std::filesystem::path prefix = exe.parent_path().parent_path();
  Layout installed = installedLayout(prefix);
  std::error_code ec;
  if (std::filesystem::is_regular_file(installed.jail, ec)) return installed;
  return build_tree;
}

}  // namespace hutch::daemon

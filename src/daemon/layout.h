// Where hutchd finds its companions by default: the helpers it starts (hutch-jail, hutch-egress,
// hutch-diff),
// the agent it puts into images, the image recipes and builder, and the dashboard's files.
//
// An installed hutchd (cmake --install, the Debian package) finds them beside itself, under its
// prefix: <prefix>/sbin/hutchd → <prefix>/libexec/hutch/ and <prefix>/share/hutch/. A hutchd run
// from its build tree finds them in that tree and its checkout. Each is still an option.
#pragma once

#include <filesystem>
#include <string>

namespace hutch::daemon {

struct Layout {
  std::string recipes;  // images/<name>/ recipe folders
  std::string builder;  // scripts/build-image.sh
  std::string agent;    // hutch-agent, put into built images
  std::string ui_dir;   // the dashboard's built files
  std::string jail;     // hutch-jail
  std::string egress;   // hutch-egress
  std::string diff;     // hutch-diff
};

// The install layout under `prefix` (e.g. /usr).
Layout installedLayout(const std::filesystem::path& prefix);

// installedLayout() of the prefix `exe` (hutchd's own path) sits in when that prefix holds
// hutch's helpers (<prefix>/libexec/hutch/hutch-jail), else `build_tree`.
Layout defaultLayout(const std::filesystem::path& exe, const Layout& build_tree);

}  // namespace hutch::daemon

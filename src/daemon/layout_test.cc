#include "daemon/layout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace hutch::daemon {
namespace {

namespace fs = std::filesystem;

const Layout kBuildTree{.recipes = "/src/images",
                        .builder = "/src/scripts/build-image.sh",
                        .agent = "/build/src/agent/hutch-agent",
                        .ui_dir = "/src/web/dashboard/dist",
                        .jail = "/build/src/jail/hutch-jail",
                        .egress = "/build/src/egress/hutch-egress",
                        .diff = "/build/src/diff/hutch-diff"};

TEST(LayoutTest, AnInstalledHutchdFindsItsHelpersUnderItsPrefix) {
  fs::path prefix = fs::temp_directory_path() / ("hutch-layout-" + std::to_string(::getpid()));
  fs::create_directories(prefix / "sbin");
  fs::create_directories(prefix / "libexec" / "hutch");
  std::ofstream(prefix / "libexec" / "hutch" / "hutch-jail") << "";
  Layout layout = defaultLayout(prefix / "sbin" / "hutchd", kBuildTree);
  EXPECT_EQ(layout.jail, (prefix / "libexec/hutch/hutch-jail").string());
  EXPECT_EQ(layout.egress, (prefix / "libexec/hutch/hutch-egress").string());
  EXPECT_EQ(layout.diff, (prefix / "libexec/hutch/hutch-diff").string());
  EXPECT_EQ(layout.agent, (prefix / "libexec/hutch/hutch-agent").string());
  EXPECT_EQ(layout.recipes, (prefix / "share/hutch/images").string());
  EXPECT_EQ(layout.builder, (prefix / "share/hutch/scripts/build-image.sh").string());
  EXPECT_EQ(layout.ui_dir, (prefix / "share/hutch/ui").string());
  fs::remove_all(prefix);
}

TEST(LayoutTest, AHutchdInItsBuildTreeUsesTheBuildTree) {
  // No libexec/hutch/hutch-jail beside it: the build tree's paths, as compiled in.
  Layout layout = defaultLayout("/build/src/daemon/hutchd", kBuildTree);
  EXPECT_EQ(layout.jail, kBuildTree.jail);
  EXPECT_EQ(layout.recipes, kBuildTree.recipes);
  EXPECT_EQ(defaultLayout("", kBuildTree).agent, kBuildTree.agent);
}

}  // namespace
}  // namespace hutch::daemon

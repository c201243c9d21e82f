// Templates end to end: build from a recipe (through the image cache), freeze a stopped box,
// run from it, and refuse what would break boxes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "harness.h"

namespace hutch::e2e {
namespace {

class TemplateTest : public ::testing::Test {
 protected:
  void SetUp() override { daemon_ = std::make_unique<Daemon>(); }
  void TearDown() override { daemon_.reset(); }
  Daemon& d() { return *daemon_; }
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(TemplateTest, FreezeAStoppedBoxAndRunFromIt) {
  ASSERT_EQ(d().hutch({"run", "--name", "golden"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"exec", "golden", "--", "sh", "-c", "echo baked > ~/baked.txt"}).exit_code,
            0);

  auto running = d().hutch({"template", "create", "--from", "golden", "snap"});
  EXPECT_EQ(running.exit_code, 65);
  EXPECT_NE(running.err.find("stop it first"), std::string::npos) << running.err;

  ASSERT_EQ(d().hutch({"stop", "golden"}).exit_code, 0);
  auto made = d().hutch({"template", "create", "--from", "golden", "snap"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto dup = d().hutch({"template", "create", "--from", "golden", "snap"});
  EXPECT_EQ(dup.exit_code, 73);

  auto child = d().hutch(
      {"run", "--name", "child", "--template", "snap", "--", "cat", "/home/hutch/baked.txt"});
  ASSERT_EQ(child.exit_code, 0) << child.err;
  EXPECT_EQ(child.out, "baked\n");
  // The template is independent of its source box.
  ASSERT_EQ(d().hutch({"rm", "golden"}).exit_code, 0);
  EXPECT_EQ(d().hutch({"exec", "child", "--", "cat", "/home/hutch/baked.txt"}).out, "baked\n");

  auto in_use = d().hutch({"template", "rm", "snap"});
  EXPECT_EQ(in_use.exit_code, 65);
  EXPECT_NE(in_use.err.find("child"), std::string::npos) << in_use.err;
  auto listed = nlohmann::json::parse(d().hutch({"--json", "template", "ls"}).out);
  bool found = false;
  for (const auto& t : listed) {
    if (t["name"] == "snap") {
      found = true;
      EXPECT_EQ(t["source"], "box");
      EXPECT_EQ(t["used_by"], nlohmann::json::array({"child"}));
    }
  }
  EXPECT_TRUE(found) << listed.dump();

  ASSERT_EQ(d().hutch({"rm", "-f", "child"}).exit_code, 0);
  auto snapshots = [&] {
    auto df = nlohmann::json::parse(d().hutch({"--json", "df"}).out, nullptr, false);
    return df.is_object() ? df["template_snapshots"].value("count", -1) : -1;
  };
  int before = snapshots();
  EXPECT_GE(before, 1) << "the child was restored from a snapshot of template snap";
  ASSERT_EQ(d().hutch({"template", "rm", "snap"}).exit_code, 0);
  EXPECT_EQ(d().hutch({"run", "--template", "snap"}).exit_code, 66);
  // Its template snapshot stood on the image just removed: it is gone with it, and removing
  // a box afterwards finds no broken chain.
  EXPECT_EQ(snapshots(), before - 1);
  ASSERT_EQ(d().hutch({"run", "--name", "after"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"rm", "-f", "after"}).exit_code, 0);
  EXPECT_EQ(readFile(d().dir() / "hutchd.log").find("is missing (chain from"), std::string::npos);
}

TEST_F(TemplateTest, BuildFromRecipeUsesTheImageCache) {
  // scripts/test.sh built this image already, so the daemon's build finds it in the cache.
  auto built = d().hutch({"--json", "template", "build", "base"});
  ASSERT_EQ(built.exit_code, 0) << built.err;
  auto t = nlohmann::json::parse(built.out);
  EXPECT_EQ(t["name"], "base");
  EXPECT_EQ(t["source"], "recipe");
  EXPECT_FALSE(t["image_key"].get<std::string>().empty());
  auto missing = d().hutch({"template", "build", "no-such-recipe"});
  EXPECT_EQ(missing.exit_code, 66);
  EXPECT_NE(missing.err.find("No recipe"), std::string::npos) << missing.err;
  auto bad = d().hutch({"template", "build", "../etc"});
  EXPECT_EQ(bad.exit_code, 64);
}

// hutch image prune: the image cache's builds that nothing uses go, with the reason for each
// that stays. The daemon gets a cache of its own (never the host's), with three fake builds:
// one unused for two days, one built just now, one the template "pinned" points at.
TEST(ImagePruneTest, RemovesOnlyBuildsNothingUsesAndSaysWhyOthersStay) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/hutch-prune-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path cache = tmpl;
  auto build = [&](const std::string& name, std::chrono::hours age) {
    fs::path dir = cache / "images" / name;
    fs::create_directories(dir);
    for (const char* file : {"manifest.json", "vmlinux", "initrd.img", "rootfs.img"}) {
      std::ofstream(dir / file) << std::string(4096, 'x');
      fs::last_write_time(dir / file, fs::file_time_type::clock::now() - age);
    }
    return dir;
  };
  const fs::path old_build = build("base-aaaaaaaaaaaa", std::chrono::hours(48));
  const fs::path fresh_build = build("base-bbbbbbbbbbbb", std::chrono::hours(0));
  const fs::path pinned_build = build("base-cccccccccccc", std::chrono::hours(48));
  {
    Daemon d({"--image-cache", cache.string()});
    fs::create_symlink(pinned_build, d.stateDir() / "templates" / "pinned");
    auto reasons = [&](const std::vector<std::string>& args) {
      std::vector<std::string> argv = {"--json", "image", "prune"};
      argv.insert(argv.end(), args.begin(), args.end());
      auto r = d.hutch(argv);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      std::map<std::string, std::string> out;
      auto answer = nlohmann::json::parse(r.out, nullptr, false);
      EXPECT_TRUE(answer.contains("images")) << r.out << r.err;
      for (const auto& image : answer["images"]) {
        out[fs::path(image["dir"].get<std::string>()).filename().string()] =
            (image["kept"].get<bool>() ? "kept: " : "gone: ") + image["reason"].get<std::string>();
      }
      return out;
    };
    auto dry = reasons({"--dry-run"});
    EXPECT_EQ(dry["base-aaaaaaaaaaaa"], "gone: unused for 48 h");
    EXPECT_EQ(dry["base-bbbbbbbbbbbb"].rfind("kept: used ", 0), 0U) << dry["base-bbbbbbbbbbbb"];
    EXPECT_EQ(dry["base-cccccccccccc"], "kept: used by template pinned");
    EXPECT_TRUE(fs::exists(old_build)) << "a dry run removed a build";

    auto pruned = reasons({});
    EXPECT_EQ(pruned["base-aaaaaaaaaaaa"], "gone: unused for 48 h");
    EXPECT_FALSE(fs::exists(old_build));
    EXPECT_TRUE(fs::exists(fresh_build / "rootfs.img"));
    EXPECT_TRUE(fs::exists(pinned_build / "rootfs.img"));

    auto all = reasons({"--keep", "0"});
    EXPECT_EQ(all.size(), 2U);
    EXPECT_EQ(all["base-bbbbbbbbbbbb"].rfind("gone: ", 0), 0U);
    EXPECT_FALSE(fs::exists(fresh_build));
    EXPECT_TRUE(fs::exists(pinned_build / "rootfs.img")) << "a build in use was removed";

    auto bad = d.hutch({"image", "prune", "--keep", "soon"});
    EXPECT_EQ(bad.exit_code, 64);
    EXPECT_NE(bad.err.find("give a duration"), std::string::npos) << bad.err;
  }
  fs::remove_all(cache);
}

}  // namespace
}  // namespace hutch::e2e

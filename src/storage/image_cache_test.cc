#include "storage/image_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>

#include <fstream>

#include "base/unique_fd.h"

namespace hutch::storage {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::file_time_type kNow = fs::file_time_type::clock::now();

CachedImage image(const std::string& dir, uint64_t mib, std::chrono::hours age) {
  return CachedImage{dir, mib << 20, kNow - age, {}};
}

TEST(PlanPruneTest, KeepsWhatIsUsedHereElsewhereOrLately) {
  std::vector<CachedImage> images = {
      image("/c/images/base-aaa", 1500, 48h), image("/c/images/base-bbb", 1500, 48h),
      image("/c/images/base-ccc", 1500, 1h), image("/c/images/docker-ddd", 3000, 72h)};
  images[3].other_users = {"/var/lib/other-hutchd"};
  auto plan = planPrune(images, {{"/c/images/base-bbb", "template base"}}, PruneOptions{}, kNow);
  ASSERT_EQ(plan.size(), 4U);
  EXPECT_TRUE(plan[0].remove) << plan[0].reason;
  EXPECT_EQ(plan[0].reason, "unused for 48 h");
  EXPECT_FALSE(plan[1].remove);
  EXPECT_EQ(plan[1].reason, "used by template base");
  EXPECT_FALSE(plan[2].remove);
  EXPECT_EQ(plan[2].reason, "used 60 min ago (kept for 24 h)");
  EXPECT_FALSE(plan[3].remove);
  EXPECT_EQ(plan[3].reason, "used by the hutchd of /var/lib/other-hutchd");

  // --keep 0: recent builds go too; used ones never.
  auto all = planPrune(images, {{"/c/images/base-bbb", "box b1"}}, PruneOptions{.keep = 0s}, kNow);
  EXPECT_TRUE(all[0].remove);
  EXPECT_FALSE(all[1].remove);
  EXPECT_TRUE(all[2].remove);
  EXPECT_FALSE(all[3].remove);
}

TEST(PlanPruneTest, ALimitRemovesTheLeastRecentlyUsedOnlyUntilUnderIt) {
  std::vector<CachedImage> images = {
      image("/c/images/a", 1000, 30h), image("/c/images/b", 1000, 50h),
      image("/c/images/c", 1000, 40h), image("/c/images/d", 1000, 0h)};
  // 4000 MiB in all, 2500 allowed: the two least recently used of the removable ones go.
  auto plan = planPrune(images, {}, PruneOptions{.keep = 1h, .limit_bytes = 2500ULL << 20}, kNow);
  EXPECT_FALSE(plan[0].remove) << plan[0].reason;
  EXPECT_NE(plan[0].reason.find("within its limit"), std::string::npos) << plan[0].reason;
  EXPECT_TRUE(plan[1].remove);
  EXPECT_TRUE(plan[2].remove);
  EXPECT_FALSE(plan[3].remove);
  // Under the limit already: nothing goes.
  auto none = planPrune(images, {}, PruneOptions{.keep = 1h, .limit_bytes = 8000ULL << 20}, kNow);
  for (const auto& d : none) EXPECT_FALSE(d.remove) << d.dir;
}

class ImageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-image-cache-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "images");
    fs::create_directories(root_ / "state-a");
    fs::create_directories(root_ / "state-b");
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path build(const std::string& name) {
    fs::path dir = root_ / "images" / name;
    fs::create_directories(dir);
    std::ofstream(dir / "manifest.json") << "{}\n";
    std::ofstream(dir / "rootfs.img") << std::string(8192, 'x');
    return dir;
  }

  fs::path root_;
};

TEST_F(ImageCacheTest, UsesAreRecordedPerHutchdAndForgottenWithTheirStateDirectory) {
  fs::path one = build("base-111");
  fs::path two = build("base-222");
  fs::create_directories(root_ / "images" / "base-333");  // incomplete: no manifest
  ImageCache a(root_, root_ / "state-a");
  ImageCache b(root_, root_ / "state-b");
  b.markUsed(two);
  a.markUsed(one);
  a.markUsed("/elsewhere/base-444");  // outside the cache: ignored

  auto seen = a.scan({{fs::weakly_canonical(one).string(), "box x"}});
  ASSERT_TRUE(seen) << seen.error().describe();
  ASSERT_EQ(seen->size(), 2U);
  EXPECT_GE((*seen)[0].bytes, 8192U);
  EXPECT_TRUE((*seen)[0].other_users.empty());
  ASSERT_EQ((*seen)[1].other_users.size(), 1U);
  EXPECT_EQ((*seen)[1].other_users[0], fs::weakly_canonical(root_ / "state-b").string());

  // a no longer uses one: its record goes; b's state directory is removed: its record too.
  fs::remove_all(root_ / "state-b");
  seen = a.scan({});
  ASSERT_TRUE(seen);
  EXPECT_TRUE((*seen)[0].other_users.empty());
  EXPECT_TRUE((*seen)[1].other_users.empty());
  EXPECT_TRUE(fs::is_empty(one / "users"));
  EXPECT_TRUE(fs::is_empty(two / "users"));
}

TEST_F(ImageCacheTest, RemoveRefusesABuildTheBuilderHoldsAndLeavesNothingOfOneItRemoves) {
  fs::path one = build("base-111");
  ImageCache cache(root_, root_ / "state-a");
  fs::create_directories(root_ / "images" / ".locks");
  fs::path lock_path = root_ / "images" / ".locks" / "base-111.lock";
  {
    UniqueFd held(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(held);
    ASSERT_EQ(::flock(held.get(), LOCK_EX), 0);
    auto refused = cache.remove(one);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("being built"), std::string::npos);
    EXPECT_TRUE(fs::exists(one / "manifest.json"));
  }
  ASSERT_TRUE(cache.remove(one));
  EXPECT_FALSE(fs::exists(one));
  EXPECT_FALSE(fs::exists(lock_path));
  std::vector<fs::path> left;
  for (const auto& e : fs::directory_iterator(root_ / "images")) left.push_back(e.path());
  ASSERT_EQ(left.size(), 1U);  // .locks only
  EXPECT_EQ(left[0].filename(), ".locks");
}

}  // namespace
}  // namespace hutch::storage

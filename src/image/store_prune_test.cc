#include "image/store_prune.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "image/digest.h"
#include "image/layout.h"
#include "image/test_tar.h"

namespace hutch::image {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using std::chrono::hours;

// A store as box/template_image.cc leaves it: layouts/<manifest hex>/index.json, every blob in
// blobs/sha256/<hex>. Two images share their base layer.
class StorePruneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(oci() / "layouts");
    fs::create_directories(oci() / "blobs" / "sha256");
    base_ = put("base layer bytes", media::kOciLayerGzip);
    app_ = put("app layer bytes", media::kOciLayerGzip);
    tool_ = put("tool layer bytes", media::kOciLayerGzip);
    app_manifest_ = image("app", {base_, app_});
    tool_manifest_ = image("tool", {base_, tool_});
  }

  fs::path oci() const { return tmp_.path() / "oci"; }
  fs::path blob(const json& d) const {
    return oci() / "blobs" / "sha256" / std::string(digestHex(d["digest"].get<std::string>()));
  }
  fs::path layout(const json& manifest) const {
    return oci() / "layouts" / std::string(digestHex(manifest["digest"].get<std::string>()));
  }

  json put(const std::string& data, std::string_view media_type) {
    const std::string digest = sha256Digest(data);
    std::ofstream(oci() / "blobs" / "sha256" / std::string(digestHex(digest)), std::ios::binary)
        << data;
    return {{"mediaType", media_type}, {"digest", digest}, {"size", data.size()}};
  }

  // An image's config and manifest as blobs, and its layout; returns the manifest descriptor.
  json image(const std::string& name, const std::vector<json>& layers) {
    json config = {{"os", "linux"},
                   {"architecture", "amd64"},
                   {"config", {{"Cmd", {name}}}},
                   {"rootfs", {{"type", "layers"}, {"diff_ids", json::array()}}}};
    for (const json& l : layers) config["rootfs"]["diff_ids"].push_back(l["digest"]);
    json c = put(config.dump(), media::kOciConfig);
    json manifest = {{"schemaVersion", 2},
                     {"mediaType", media::kOciManifest},
                     {"config", c},
                     {"layers", layers}};
    json m = put(manifest.dump(), media::kOciManifest);
    configs_[name] = c;
    fs::create_directories(layout(m));
    json entry = m;
    entry["annotations"] = {{"org.opencontainers.image.ref.name", "image"}};
    std::ofstream(layout(m) / "index.json") << json{{"schemaVersion", 2}, {"manifests", {entry}}};
    std::ofstream(layout(m) / "oci-layout") << R"({"imageLayoutVersion":"1.0.0"})";
    return m;
  }

  // Everything written now is two days old by then.
  static StorePruneOptions later(bool dry_run = false) {
    return {
        .dry_run = dry_run, .keep = hours(24), .now = fs::file_time_type::clock::now() + hours(48)};
  }
  std::map<std::string, std::string> appInUse() const {
    return {{app_manifest_["digest"].get<std::string>(), "template app"}};
  }
  const LayoutDecision* decision(const StorePrune& p, const json& manifest) const {
    for (const LayoutDecision& d : p.layouts) {
      if (d.digest == manifest["digest"]) return &d;
    }
    return nullptr;
  }

  testing::TempDir tmp_;
  json base_, app_, tool_, app_manifest_, tool_manifest_;
  std::map<std::string, json> configs_;
};

TEST_F(StorePruneTest, AnUnusedImageGoesWithItsOwnBlobsAndTheSharedLayerStays) {
  auto pruned = pruneStore(oci(), appInUse(), later());
  ASSERT_TRUE(pruned) << pruned.error().message();
  ASSERT_EQ(pruned->layouts.size(), 2u);
  const LayoutDecision* app = decision(*pruned, app_manifest_);
  const LayoutDecision* tool = decision(*pruned, tool_manifest_);
  ASSERT_TRUE(app && tool);
  EXPECT_FALSE(app->remove);
  EXPECT_EQ(app->reason, "template app");
  EXPECT_TRUE(tool->remove);
  EXPECT_EQ(tool->reason, "unused");
  EXPECT_FALSE(fs::exists(layout(tool_manifest_)));
  EXPECT_TRUE(fs::exists(layout(app_manifest_) / "index.json"));
  // The tool image's own layer, config and manifest are gone; the base layer both share stays.
  EXPECT_FALSE(fs::exists(blob(tool_)));
  EXPECT_FALSE(fs::exists(blob(configs_["tool"])));
  EXPECT_FALSE(fs::exists(blob(tool_manifest_)));
  for (const json& kept : {base_, app_, configs_["app"], app_manifest_}) {
    EXPECT_TRUE(fs::exists(blob(kept))) << kept.dump();
  }
  EXPECT_EQ(pruned->blobs_removed, 3u);
  EXPECT_EQ(pruned->blobs_kept, 4u);
  EXPECT_GT(pruned->freed_bytes, std::string("tool layer bytes").size());
  // What is left is still an image that resolves whole.
  EXPECT_TRUE(resolveLayout(layout(app_manifest_), oci() / "blobs", "image"));
  // Nothing else to do the second time.
  auto again = pruneStore(oci(), appInUse(), later());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->blobs_removed, 0u);
  EXPECT_EQ(again->freed_bytes, 0u);
}

TEST_F(StorePruneTest, NoTemplateLeftMeansAnEmptyStore) {
  auto pruned = pruneStore(oci(), {}, later());
  ASSERT_TRUE(pruned);
  EXPECT_EQ(pruned->blobs_removed, 7u);
  EXPECT_TRUE(fs::is_empty(oci() / "layouts"));
  EXPECT_TRUE(fs::is_empty(oci() / "blobs" / "sha256"));
}

TEST_F(StorePruneTest, ADryRunRemovesNothingAndSaysWhatWouldGo) {
  auto pruned = pruneStore(oci(), appInUse(), later(/*dry_run=*/true));
  ASSERT_TRUE(pruned);
  EXPECT_TRUE(decision(*pruned, tool_manifest_)->remove);
  EXPECT_EQ(pruned->blobs_removed, 3u);
  EXPECT_TRUE(fs::exists(layout(tool_manifest_) / "index.json"));
  EXPECT_TRUE(fs::exists(blob(tool_)));
}

TEST_F(StorePruneTest, WhatWasPulledWithinKeepStays) {
  auto pruned = pruneStore(oci(), {}, {.keep = hours(24)});
  ASSERT_TRUE(pruned);
  for (const LayoutDecision& d : pruned->layouts) {
    EXPECT_FALSE(d.remove);
    EXPECT_EQ(d.reason, "pulled within --keep");
  }
  EXPECT_EQ(pruned->blobs_removed, 0u);
  EXPECT_TRUE(fs::exists(blob(tool_)));
}

TEST_F(StorePruneTest, ALayoutBeingPulledStaysWithItsBlobs) {
  const fs::path lock = layout(tool_manifest_).string() + ".lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // as a pull holds it (another open file description)
  auto pruned = pruneStore(oci(), appInUse(), later());
  ::close(fd);
  ASSERT_TRUE(pruned);
  EXPECT_FALSE(decision(*pruned, tool_manifest_)->remove);
  EXPECT_EQ(decision(*pruned, tool_manifest_)->reason, "being pulled");
  EXPECT_TRUE(fs::exists(blob(tool_)));
  // Once the pull has let go, it goes, and so does its lock file.
  auto after = pruneStore(oci(), appInUse(), later());
  ASSERT_TRUE(after);
  EXPECT_TRUE(decision(*after, tool_manifest_)->remove);
  EXPECT_FALSE(fs::exists(lock));
}

TEST_F(StorePruneTest, ALeftoverOfAPullThatDiedAndAStrayBlobGo) {
  fs::create_directories(oci() / "layouts" / std::string(64, 'e'));
  std::ofstream(oci() / "layouts" / std::string(64, 'e') / "oci-put-blob123") << "partial";
  json stray = put("a blob nothing names", media::kOciLayerGzip);
  auto pruned = pruneStore(
      oci(),
      {{app_manifest_["digest"], "template app"}, {tool_manifest_["digest"], "template tool"}},
      later());
  ASSERT_TRUE(pruned);
  EXPECT_FALSE(fs::exists(oci() / "layouts" / std::string(64, 'e')));
  EXPECT_FALSE(fs::exists(blob(stray)));
  EXPECT_EQ(pruned->blobs_removed, 1u);
  EXPECT_TRUE(fs::exists(blob(tool_)));
}

TEST_F(StorePruneTest, AKeptLayoutThatCannotBeReadKeepsEveryBlob) {
  std::ofstream(layout(app_manifest_) / "index.json") << "{not json";
  auto pruned = pruneStore(oci(), appInUse(), later());
  ASSERT_TRUE(pruned);
  EXPECT_NE(pruned->blobs_kept_because.find(layout(app_manifest_).string()), std::string::npos)
      << pruned->blobs_kept_because;
  EXPECT_EQ(pruned->blobs_removed, 0u);
  EXPECT_TRUE(fs::exists(blob(tool_)));  // its layout went; its blobs wait for a readable store
  EXPECT_FALSE(fs::exists(layout(tool_manifest_)));
}

TEST_F(StorePruneTest, AStoreNeverPulledIntoIsNothingToDo) {
  auto pruned = pruneStore(tmp_.path() / "none", {}, later());
  ASSERT_TRUE(pruned);
  EXPECT_TRUE(pruned->layouts.empty());
  EXPECT_EQ(pruned->blobs_removed, 0u);
}

TEST_F(StorePruneTest, ARootDiskGoesOnceNoTemplateLinksIt) {
  for (const char* key : {"linked", "alone", "k.tmp-abc"}) {
    fs::create_directories(oci() / "roots" / key);
    std::ofstream(oci() / "roots" / key / "rootfs.img") << "disk";
  }
  fs::create_directories(tmp_.path() / "template");
  fs::create_hard_link(oci() / "roots" / "linked" / "rootfs.img",
                       tmp_.path() / "template" / "rootfs.img");
  auto pruned = pruneStore(oci(), appInUse(), later());
  ASSERT_TRUE(pruned);
  EXPECT_EQ(pruned->roots_removed, 2u);
  EXPECT_EQ(pruned->roots_kept, 1u);
  EXPECT_TRUE(fs::exists(oci() / "roots" / "linked" / "rootfs.img"));
  EXPECT_FALSE(fs::exists(oci() / "roots" / "alone"));
  EXPECT_FALSE(fs::exists(oci() / "roots" / "k.tmp-abc"));
  // Once the template's link goes, so does the kept disk; never within --keep.
  fs::remove(tmp_.path() / "template" / "rootfs.img");
  auto fresh = pruneStore(oci(), appInUse(), {.keep = hours(24)});
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->roots_removed, 0u);
  auto after = pruneStore(oci(), appInUse(), later());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->roots_removed, 1u);
  EXPECT_FALSE(fs::exists(oci() / "roots" / "linked"));
}

// hutchd's own prune past --image-cache-max-gib: the oldest unused image goes first, only
// until the store fits; an image a template names never goes, whatever the limit.
TEST_F(StorePruneTest, UnderASizeLimitTheOldestUnusedImageGoesUntilTheStoreFits) {
  json stray = put("a blob nothing names", media::kOciLayerGzip);
  uint64_t total = 0;
  for (const auto& f : fs::recursive_directory_iterator(oci())) {
    if (f.is_regular_file()) total += f.file_size();
  }
  // The app image was pulled before the tool image.
  fs::last_write_time(layout(app_manifest_) / "index.json",
                      fs::file_time_type::clock::now() - hours(10));
  StorePruneOptions options = later();
  options.limit_bytes = total - 1;
  auto pruned = pruneStore(oci(), {}, options);
  ASSERT_TRUE(pruned) << pruned.error().message();
  EXPECT_FALSE(fs::exists(blob(stray)));  // no image uses it: it goes first
  const LayoutDecision* app = decision(*pruned, app_manifest_);
  const LayoutDecision* tool = decision(*pruned, tool_manifest_);
  ASSERT_TRUE(app && tool);
  // The stray blob alone brought the store within the limit: both images stay.
  EXPECT_FALSE(app->remove);
  EXPECT_FALSE(tool->remove);
  EXPECT_EQ(tool->reason, "unused, within --image-cache-max-gib");
  EXPECT_EQ(pruned->blobs_removed, 1u);

  // A limit that one image's own blobs satisfy: the older (app) goes, with its own layer; the
  // shared base layer and the tool image stay.
  options.limit_bytes = total - (std::string("a blob nothing names").size() + 1);
  pruned = pruneStore(oci(), {}, options);
  ASSERT_TRUE(pruned);
  EXPECT_TRUE(decision(*pruned, app_manifest_)->remove);
  EXPECT_FALSE(decision(*pruned, tool_manifest_)->remove);
  EXPECT_FALSE(fs::exists(layout(app_manifest_)));
  EXPECT_FALSE(fs::exists(blob(app_)));
  EXPECT_FALSE(fs::exists(blob(configs_["app"])));
  EXPECT_TRUE(fs::exists(blob(base_)));
  EXPECT_TRUE(resolveLayout(layout(tool_manifest_), oci() / "blobs", "image"));

  // A limit of nothing: every unused image goes, never one a template names.
  options.limit_bytes = 0;
  pruned = pruneStore(oci(), {{tool_manifest_["digest"], "template tool"}}, options);
  ASSERT_TRUE(pruned);
  EXPECT_FALSE(decision(*pruned, tool_manifest_)->remove);
  EXPECT_TRUE(resolveLayout(layout(tool_manifest_), oci() / "blobs", "image"));
}

TEST_F(StorePruneTest, UnderASizeLimitAnUnusedRootDiskGoesOldestFirst) {
  for (const char* key : {"older", "newer"}) {
    fs::create_directories(oci() / "roots" / key);
    std::ofstream(oci() / "roots" / key / "rootfs.img") << std::string(64 << 10, 'd');
  }
  fs::last_write_time(oci() / "roots" / "older", fs::file_time_type::clock::now() - hours(10));
  StorePruneOptions options = later();
  // Both images are in use; the store is over its limit by less than one root disk.
  uint64_t total = 0;
  for (const auto& f : fs::recursive_directory_iterator(oci())) {
    if (f.is_regular_file()) total += f.file_size();
  }
  options.limit_bytes = total - 1024;
  auto pruned = pruneStore(
      oci(),
      {{app_manifest_["digest"], "template app"}, {tool_manifest_["digest"], "template tool"}},
      options);
  ASSERT_TRUE(pruned);
  EXPECT_EQ(pruned->roots_removed, 1u);
  EXPECT_EQ(pruned->roots_kept, 1u);
  EXPECT_FALSE(fs::exists(oci() / "roots" / "older"));
  EXPECT_TRUE(fs::exists(oci() / "roots" / "newer" / "rootfs.img"));
  EXPECT_EQ(pruned->blobs_removed, 0u);
}

TEST(LayoutBlobsTest, AnIndexInTheLayoutIsFollowedToEachImage) {
  testing::TempDir tmp;
  const fs::path blobs = tmp.path() / "blobs";
  fs::create_directories(blobs / "sha256");
  auto put = [&](const std::string& data, std::string_view type) {
    const std::string digest = sha256Digest(data);
    std::ofstream(blobs / "sha256" / std::string(digestHex(digest))) << data;
    return json{{"mediaType", type}, {"digest", digest}, {"size", data.size()}};
  };
  json layer = put("layer", media::kOciLayerGzip);
  json config =
      put(R"({"os":"linux","architecture":"amd64","rootfs":{"type":"layers","diff_ids":[]}})",
          media::kOciConfig);
  json manifest = put(json{{"schemaVersion", 2},
                           {"mediaType", media::kOciManifest},
                           {"config", config},
                           {"layers", {layer}}}
                          .dump(),
                      media::kOciManifest);
  json missing = {{"mediaType", media::kOciManifest},
                  {"digest", sha256Digest("not here")},
                  {"size", 8},
                  {"platform", {{"os", "linux"}, {"architecture", "arm64"}}}};
  manifest["platform"] = {{"os", "linux"}, {"architecture", "amd64"}};
  json index = put(
      json{
          {"schemaVersion", 2}, {"mediaType", media::kOciIndex}, {"manifests", {manifest, missing}}}
          .dump(),
      media::kOciIndex);
  fs::create_directories(tmp.path() / "layout");
  std::ofstream(tmp.path() / "layout" / "index.json")
      << json{{"schemaVersion", 2}, {"manifests", {index}}};
  auto named = layoutBlobs(tmp.path() / "layout", blobs);
  ASSERT_TRUE(named) << named.error().message();
  EXPECT_EQ(*named, (std::set<std::string>{index["digest"], manifest["digest"], config["digest"],
                                           layer["digest"], missing["digest"]}));
}

}  // namespace
}  // namespace hutch::image

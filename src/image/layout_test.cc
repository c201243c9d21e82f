#include "image/layout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "image/test_tar.h"

namespace hutch::image {
namespace {

using json = nlohmann::json;
using testing::TempDir;

class LayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    layout_ = tmp_.path() / "layout";
    blobs_ = tmp_.path() / "blobs";
    std::filesystem::create_directories(layout_);
    std::filesystem::create_directories(blobs_ / "sha256");
  }

  static void writeFile(const std::filesystem::path& p, const std::string& data) {
    std::ofstream(p, std::ios::binary) << data;
  }

  json put(const std::string& data, std::string_view media_type) {
    std::string digest = sha256Digest(data);
    std::filesystem::create_directories(blob_root() / "sha256");
    writeFile(blob_root() / "sha256" / std::string(digestHex(digest)), data);
    return {{"mediaType", media_type}, {"digest", digest}, {"size", data.size()}};
  }
  std::filesystem::path blob_root() const { return shared_ ? blobs_ : layout_ / "blobs"; }

  // An image of two layers for `arch`; returns the manifest's descriptor.
  json image(const std::string& arch = "amd64") {
    std::string tar1 = testing::makeTar({testing::file("etc/os-release", "ID=test\n")});
    std::string tar2 = testing::makeTar({testing::file("app/main.py", "print(1)\n")});
    std::string gz1 =
        testing::makeTar({testing::file("etc/os-release", "ID=test\n")}, Compression::kGzip);
    layer1_ = put(gz1, media::kOciLayerGzip);
    layer2_ = put(tar2, media::kOciLayer);
    json config = {
        {"os", "linux"},
        {"architecture", arch},
        {"config", {{"Cmd", {"python3"}}}},
        {"rootfs", {{"type", "layers"}, {"diff_ids", {sha256Digest(tar1), sha256Digest(tar2)}}}}};
    config_ = put(config.dump(), media::kOciConfig);
    json manifest = {{"schemaVersion", 2},
                     {"mediaType", media::kOciManifest},
                     {"config", config_},
                     {"layers", {layer1_, layer2_}}};
    return put(manifest.dump(), media::kOciManifest);
  }

  void writeIndex(std::vector<json> entries) {
    json index = {{"schemaVersion", 2}, {"manifests", entries}};
    writeFile(layout_ / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    writeFile(layout_ / "index.json", index.dump());
  }
  static json named(json d, const std::string& name) {
    d["annotations"] = {{"org.opencontainers.image.ref.name", name}};
    return d;
  }
  Result<ResolvedImage> resolve(std::string_view ref = "img") {
    return resolveLayout(layout_, shared_ ? blobs_ : std::filesystem::path(), ref);
  }

  TempDir tmp_;
  std::filesystem::path layout_;
  std::filesystem::path blobs_;
  bool shared_ = true;
  json layer1_, layer2_, config_;
};

TEST_F(LayoutTest, ResolvesAManifestInASharedBlobDir) {
  json manifest = image();
  writeIndex({named(put("{}", media::kOciManifest), "other"), named(manifest, "img")});
  auto r = resolve();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->manifest_digest, manifest["digest"]);
  EXPECT_EQ(r->config_digest, config_["digest"]);
  EXPECT_EQ(r->config.cmd, std::vector<std::string>{"python3"});
  ASSERT_EQ(r->layers.size(), 2u);
  EXPECT_EQ(r->layers[0].descriptor.compression, Compression::kGzip);
  EXPECT_EQ(r->layers[1].path,
            blobs_ / "sha256" / std::string(digestHex(layer2_["digest"].get<std::string>())));
  auto fd = openBlob(r->blob_root, r->layers[0].descriptor.digest);
  ASSERT_TRUE(fd);
}

TEST_F(LayoutTest, FollowsANestedIndexToAmd64) {
  shared_ = false;
  json arm = image("arm64");
  arm["platform"] = {{"os", "linux"}, {"architecture", "arm64"}, {"variant", "v8"}};
  json amd = image();
  amd["platform"] = {{"os", "linux"}, {"architecture", "amd64"}};
  json index = {{"schemaVersion", 2}, {"mediaType", media::kOciIndex}, {"manifests", {arm, amd}}};
  writeIndex({named(put(index.dump(), media::kOciIndex), "img")});
  auto r = resolve();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->manifest_digest, amd["digest"]);
  EXPECT_EQ(r->config.architecture, "amd64");
  EXPECT_EQ(r->blob_root, layout_ / "blobs");

  json only_arm = {{"schemaVersion", 2}, {"mediaType", media::kOciIndex}, {"manifests", {arm}}};
  writeIndex({named(put(only_arm.dump(), media::kOciIndex), "img")});
  auto none = resolve();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), Errc::kNotFound);
  EXPECT_EQ(none.error().message(),
            "The image has no linux/amd64 variant; it offers linux/arm64/v8");
}

TEST_F(LayoutTest, NamesWhatTheLayoutHas) {
  writeIndex({named(image(), "a"), named(image(), "b")});
  auto r = resolve("c");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kNotFound);
  EXPECT_NE(r.error().message().find("(it has: a, b)"), std::string::npos) << r.error().message();
  std::filesystem::remove(layout_ / "index.json");
  EXPECT_EQ(resolve().error().code(), Errc::kNotFound);
}

TEST_F(LayoutTest, RefusesAlteredBlobs) {
  json manifest = image();
  writeIndex({named(manifest, "img")});
  auto path = [&](const json& d) {
    return blobs_ / "sha256" / std::string(digestHex(d["digest"].get<std::string>()));
  };
  // Same size, other bytes: the digest catches it.
  std::ifstream in(path(config_), std::ios::binary);
  std::string original((std::istreambuf_iterator<char>(in)), {});
  std::string altered = original;
  altered[altered.size() - 2] = altered[altered.size() - 2] == ']' ? '}' : ']';
  writeFile(path(config_), altered);
  auto r = resolve();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(r.error().message().find("does not match its digest"), std::string::npos);
  // Another size.
  writeFile(path(config_), original + " ");
  EXPECT_NE(resolve().error().message().find("bytes but its descriptor says"), std::string::npos);
  // A symlink in its place, to a file with the right content.
  writeFile(tmp_.path() / "outside", original);
  std::filesystem::remove(path(config_));
  std::filesystem::create_symlink(tmp_.path() / "outside", path(config_));
  auto link = resolve();
  ASSERT_FALSE(link);
  EXPECT_NE(link.error().message().find("through a symlink"), std::string::npos);
  std::filesystem::remove(path(config_));
  writeFile(path(config_), original);
  ASSERT_TRUE(resolve());
  // A layer missing or of another size.
  std::filesystem::remove(path(layer2_));
  EXPECT_EQ(resolve().error().code(), Errc::kNotFound);
  writeFile(path(layer2_), "short");
  EXPECT_NE(resolve().error().message().find("bytes but its descriptor says"), std::string::npos);
  // A directory instead of a blob.
  std::filesystem::remove(path(layer2_));
  std::filesystem::create_directory(path(layer2_));
  EXPECT_EQ(resolve().error().code(), Errc::kInvalidArgument);
}

TEST_F(LayoutTest, ChecksTheConfigAgainstTheManifest) {
  std::string tar = testing::makeTar({testing::file("x", "y")});
  json layer = put(tar, media::kOciLayer);
  json config = {{"os", "linux"},
                 {"architecture", "amd64"},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", json::array()}}}};
  json manifest = {
      {"schemaVersion", 2}, {"config", put(config.dump(), media::kOciConfig)}, {"layers", {layer}}};
  writeIndex({named(put(manifest.dump(), media::kOciManifest), "img")});
  auto r = resolve();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("0 layer diff_ids but the manifest has 1"), std::string::npos);
  json v1 = {{"schemaVersion", 1}, {"name", "x"}};
  writeIndex({named(put(v1.dump(), media::kOciManifest), "img")});
  EXPECT_EQ(resolve().error().code(), Errc::kUnsupported);
}

TEST(OpenBlobTest, RefusesBadDigests) {
  TempDir tmp;
  for (const char* bad : {"sha256:../../etc/passwd", "sha256:abc", "md5:x", ""}) {
    auto fd = openBlob(tmp.path(), bad);
    ASSERT_FALSE(fd);
    EXPECT_EQ(fd.error().code(), Errc::kInvalidArgument);
  }
  // The sha256 directory itself a symlink out of the blob dir.
  TempDir other;
  std::string digest = sha256Digest("x");
  std::filesystem::create_directories(other.path() / "sha256");
  std::ofstream(other.path() / "sha256" / std::string(digestHex(digest))) << "x";
  std::filesystem::create_directory_symlink(other.path() / "sha256", tmp.path() / "sha256");
  auto fd = openBlob(tmp.path(), digest);
  ASSERT_FALSE(fd);
  EXPECT_NE(fd.error().message().find("symlink"), std::string::npos);
}

}  // namespace
}  // namespace hutch::image

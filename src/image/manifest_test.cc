#include "image/manifest.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hutch::image {
namespace {

using json = nlohmann::json;

std::string digestOf(char c) {
  return "sha256:" + std::string(64, c);
}

json descriptor(std::string_view media_type, char c, int64_t size) {
  return {{"mediaType", media_type}, {"digest", digestOf(c)}, {"size", size}};
}

json ociManifest() {
  return {{"schemaVersion", 2},
          {"mediaType", media::kOciManifest},
          {"config", descriptor(media::kOciConfig, 'c', 1234)},
          {"layers",
           {descriptor(media::kOciLayerGzip, '1', 100), descriptor(media::kOciLayerZstd, '2', 200),
            descriptor(media::kOciLayer, '3', 300)}},
          {"annotations", {{"org.opencontainers.image.created", "2024-01-01T00:00:00Z"}}}};
}

json platformEntry(std::string_view media_type, char c, std::string os, std::string arch,
                   std::string variant = "") {
  json d = descriptor(media_type, c, 500);
  d["platform"] = {{"os", os}, {"architecture", arch}};
  if (!variant.empty()) d["platform"]["variant"] = variant;
  return d;
}

Result<MediaDocument> parse(const json& j, std::string_view hint = "", const Limits& limits = {}) {
  return parseDocument(j.dump(), hint, limits);
}

void expectError(const Result<MediaDocument>& r, Errc code, std::string_view text) {
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), code) << r.error().message();
  EXPECT_NE(r.error().message().find(text), std::string::npos) << r.error().message();
}

TEST(ManifestTest, OciManifest) {
  auto doc = parse(ociManifest(), media::kOciManifest);
  ASSERT_TRUE(doc) << doc.error().message();
  const auto& m = std::get<Manifest>(*doc);
  EXPECT_EQ(m.media_type, media::kOciManifest);
  EXPECT_EQ(m.config.digest, digestOf('c'));
  EXPECT_EQ(m.config.size, 1234);
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[0].compression, Compression::kGzip);
  EXPECT_EQ(m.layers[1].compression, Compression::kZstd);
  EXPECT_EQ(m.layers[2].compression, Compression::kNone);
  EXPECT_EQ(m.layers[2].size, 300);
}

TEST(ManifestTest, DockerSchema2) {
  json j = {{"schemaVersion", 2},
            {"mediaType", media::kDockerManifest},
            {"config", descriptor(media::kDockerConfig, 'c', 10)},
            {"layers", {descriptor(media::kDockerLayerGzip, '1', 20)}}};
  auto doc = parse(j, "");
  ASSERT_TRUE(doc) << doc.error().message();
  const auto& m = std::get<Manifest>(*doc);
  EXPECT_EQ(m.media_type, media::kDockerManifest);
  EXPECT_EQ(m.layers.at(0).compression, Compression::kGzip);
}

TEST(ManifestTest, MediaTypeFromHintOrShape) {
  json j = ociManifest();
  j.erase("mediaType");
  auto hinted = parse(j, media::kOciManifest);
  ASSERT_TRUE(hinted);
  EXPECT_EQ(std::get<Manifest>(*hinted).media_type, media::kOciManifest);
  ASSERT_TRUE(parse(j, ""));
  json index = {{"schemaVersion", 2}, {"manifests", json::array()}};
  auto shaped = parse(index, "");
  ASSERT_TRUE(shaped);
  EXPECT_TRUE(std::holds_alternative<Index>(*shaped));
  expectError(parse(ociManifest(), media::kOciIndex), Errc::kInvalidArgument, "but was given as");
  expectError(parse(json{{"schemaVersion", 2}}, ""), Errc::kInvalidArgument, "neither");
  expectError(parse(json{{"schemaVersion", 2}, {"mediaType", "text/html"}}, ""), Errc::kUnsupported,
              "unknown type text/html");
}

TEST(ManifestTest, RefusesSchema1) {
  constexpr std::string_view kMessage =
      "Docker schema 1 images are not supported; push the image again with a current Docker or "
      "skopeo";
  json v1 = {{"schemaVersion", 1}, {"name", "library/x"}, {"fsLayers", json::array()}};
  for (auto r :
       {parse(v1, ""), parse(v1, "application/vnd.docker.distribution.manifest.v1+json"),
        parseDocument("junk", "application/vnd.docker.distribution.manifest.v1+prettyjws")}) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), Errc::kUnsupported);
    EXPECT_EQ(r.error().message(), kMessage);
  }
}

TEST(ManifestTest, RefusesMalformedDescriptors) {
  auto with = [](auto edit) {
    json j = ociManifest();
    edit(j["layers"][0]);
    return parse(j, "");
  };
  expectError(with([](json& l) { l["digest"] = "sha512:" + std::string(128, 'a'); }),
              Errc::kInvalidArgument, "only sha256");
  expectError(with([](json& l) { l["digest"] = "sha256:" + std::string(64, 'A'); }),
              Errc::kInvalidArgument, "not a sha256 digest");
  expectError(with([](json& l) { l["digest"] = "sha256:abc"; }), Errc::kInvalidArgument,
              "not a sha256 digest");
  expectError(with([](json& l) { l["digest"] = 5; }), Errc::kInvalidArgument, "not a string");
  expectError(with([](json& l) { l["size"] = -1; }), Errc::kInvalidArgument, "non-negative");
  expectError(with([](json& l) { l["size"] = 1.5; }), Errc::kInvalidArgument, "non-negative");
  expectError(with([](json& l) { l["size"] = 18446744073709551615ull; }), Errc::kInvalidArgument,
              "non-negative");
  expectError(with([](json& l) { l.erase("size"); }), Errc::kInvalidArgument, "non-negative");
  expectError(with([](json& l) {
                l["annotations"] = {{"a", 1}};
              }),
              Errc::kInvalidArgument, "non-string value");
  expectError(with([](json& l) { l["platform"] = "linux"; }), Errc::kInvalidArgument,
              "\"platform\"");
  expectError(parseDocument("{", ""), Errc::kInvalidArgument, "not a JSON object");
  expectError(parseDocument("[1]", ""), Errc::kInvalidArgument, "not a JSON object");
  json j = ociManifest();
  j["schemaVersion"] = 3;
  expectError(parse(j), Errc::kInvalidArgument, "schemaVersion");
}

TEST(ManifestTest, RefusesLayersHutchCannotUse) {
  auto layer = [](std::string_view type) {
    json j = ociManifest();
    j["layers"][1]["mediaType"] = type;
    return parse(j, "");
  };
  expectError(layer("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"),
              Errc::kUnsupported, "foreign (non-distributable) layer");
  expectError(layer("application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"),
              Errc::kUnsupported, "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip");
  expectError(layer("application/vnd.oci.image.layer.v1.tar+bzip2"), Errc::kUnsupported,
              "unknown type application/vnd.oci.image.layer.v1.tar+bzip2");
  json helm = ociManifest();
  helm["config"]["mediaType"] = "application/vnd.cncf.helm.config.v1+json";
  expectError(parse(helm), Errc::kUnsupported, "not a container image");
}

TEST(ManifestTest, Limits) {
  Limits small;
  small.max_document_bytes = 100;
  expectError(parse(ociManifest(), "", small), Errc::kResourceExhausted, "limit of 100");
  Limits few;
  few.max_layers = 2;
  expectError(parse(ociManifest(), "", few), Errc::kResourceExhausted, "3 layers");
  Limits bytes;
  bytes.max_total_layer_bytes = 599;
  expectError(parse(ociManifest(), "", bytes), Errc::kResourceExhausted, "compressed");
  bytes.max_total_layer_bytes = 600;
  EXPECT_TRUE(parse(ociManifest(), "", bytes));
  json huge = ociManifest();
  huge["layers"][0]["size"] = int64_t{1} << 62;
  huge["layers"][1]["size"] = int64_t{1} << 62;
  expectError(parse(huge), Errc::kResourceExhausted, "compressed");
  Limits entries;
  entries.max_index_entries = 1;
  json index = {{"mediaType", media::kOciIndex},
                {"manifests",
                 {platformEntry(media::kOciManifest, 'a', "linux", "amd64"),
                  platformEntry(media::kOciManifest, 'b', "linux", "arm64")}}};
  expectError(parse(index, "", entries), Errc::kResourceExhausted, "2 manifests");
}

TEST(ManifestTest, IndexesOfBothFamilies) {
  for (std::string_view types : {media::kOciIndex, media::kDockerList}) {
    std::string_view entry_type =
        types == media::kOciIndex ? media::kOciManifest : media::kDockerManifest;
    json index = {{"schemaVersion", 2},
                  {"mediaType", types},
                  {"manifests",
                   {platformEntry(entry_type, 'a', "linux", "arm64", "v8"),
                    platformEntry(entry_type, 'b', "linux", "amd64"),
                    platformEntry(entry_type, 'c', "unknown", "unknown")}}};
    auto doc = parse(index, types);
    ASSERT_TRUE(doc) << doc.error().message();
    const auto& i = std::get<Index>(*doc);
    ASSERT_EQ(i.manifests.size(), 3u);
    EXPECT_EQ(i.manifests[0].platform->variant, "v8");
    auto chosen = selectPlatform(i);
    ASSERT_TRUE(chosen);
    EXPECT_EQ(chosen->digest, digestOf('b'));
    auto arm = selectPlatform(i, {"linux", "arm64", "v8"});
    ASSERT_TRUE(arm);
    EXPECT_EQ(arm->digest, digestOf('a'));
  }
}

TEST(ManifestTest, SelectPlatform) {
  Index index;
  auto entry = [](char c, std::string os, std::string arch, std::string variant = "") {
    Descriptor d;
    d.media_type = media::kOciManifest;
    d.digest = digestOf(c);
    d.platform = Platform{std::move(os), std::move(arch), std::move(variant)};
    return d;
  };
  index.manifests = {entry('a', "linux", "arm64", "v8"), entry('b', "linux", "s390x"),
                     entry('c', "unknown", "unknown")};
  auto none = selectPlatform(index);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), Errc::kNotFound);
  EXPECT_EQ(none.error().message(),
            "The image has no linux/amd64 variant; it offers linux/arm64/v8, linux/s390x");
  // An exact variant wins; without a wanted variant the variant-less entry is preferred.
  index.manifests = {entry('a', "linux", "amd64", "v3"), entry('b', "linux", "amd64")};
  EXPECT_EQ(selectPlatform(index)->digest, digestOf('b'));
  EXPECT_EQ(selectPlatform(index, {"linux", "amd64", "v3"})->digest, digestOf('a'));
  EXPECT_FALSE(selectPlatform(index, {"linux", "amd64", "v4"}));
  index.manifests = {entry('a', "linux", "amd64", "v2")};
  EXPECT_EQ(selectPlatform(index)->digest, digestOf('a'));
  // One manifest without a platform is taken; nested indexes are skipped.
  Descriptor bare = entry('d', "", "");
  bare.platform.reset();
  Descriptor nested = entry('e', "linux", "amd64");
  nested.media_type = media::kOciIndex;
  index.manifests = {bare, nested};
  EXPECT_EQ(selectPlatform(index)->digest, digestOf('d'));
  index.manifests = {};
  EXPECT_EQ(selectPlatform(index).error().message(),
            "The image has no linux/amd64 variant; it offers no platform-specific images");
}

constexpr std::string_view kConfig = R"({
  "architecture": "amd64", "os": "linux", "created": "2024-01-01T00:00:00Z",
  "config": {
    "Env": ["PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"],
    "Entrypoint": ["/docker-entrypoint.sh"], "Cmd": ["python3"],
    "WorkingDir": "/app", "User": "1000:1000", "StopSignal": "SIGTERM",
    "ExposedPorts": {"80/tcp": {}, "53/udp": {}},
    "Labels": {"maintainer": "someone"}, "Volumes": null, "OnBuild": null
  },
  "rootfs": {"type": "layers", "diff_ids": [
    "sha256:1111111111111111111111111111111111111111111111111111111111111111",
    "sha256:2222222222222222222222222222222222222222222222222222222222222222"]},
  "history": [{"created_by": "x"}]
})";

TEST(ManifestTest, Config) {
  auto c = parseConfig(kConfig);
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->os, "linux");
  EXPECT_EQ(c->architecture, "amd64");
  EXPECT_EQ(c->env, (std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"}));
  EXPECT_EQ(c->entrypoint, std::vector<std::string>{"/docker-entrypoint.sh"});
  EXPECT_EQ(c->cmd, std::vector<std::string>{"python3"});
  EXPECT_EQ(c->working_dir, "/app");
  EXPECT_EQ(c->user, "1000:1000");
  EXPECT_EQ(c->stop_signal, "SIGTERM");
  EXPECT_EQ(c->exposed_ports, (std::vector<std::string>{"53/udp", "80/tcp"}));
  EXPECT_EQ(c->labels.at("maintainer"), "someone");
  ASSERT_EQ(c->diff_ids.size(), 2u);

  auto minimal = parseConfig(
      R"({"os":"linux","architecture":"amd64","config":{"Env":null,"Cmd":null},
          "rootfs":{"type":"layers","diff_ids":[]}})");
  ASSERT_TRUE(minimal) << minimal.error().message();
  EXPECT_TRUE(minimal->env.empty());

  for (std::string_view bad :
       {R"({"os":"linux","rootfs":{"type":"layers","diff_ids":[]}})",
        R"({"os":"linux","architecture":"amd64"})",
        R"({"os":"linux","architecture":"amd64","rootfs":{"type":"x","diff_ids":[]}})",
        R"({"os":"linux","architecture":"amd64","rootfs":{"type":"layers","diff_ids":["x"]}})",
        R"({"os":"linux","architecture":"amd64","config":{"Env":"A=B"},
               "rootfs":{"type":"layers","diff_ids":[]}})",
        R"({"os":"linux","architecture":"amd64","config":{"Cmd":[1]},
               "rootfs":{"type":"layers","diff_ids":[]}})",
        R"({"os":"linux","architecture":"amd64","config":{"Labels":{"a":1}},
               "rootfs":{"type":"layers","diff_ids":[]}})",
        R"({"os":"linux","architecture":"amd64","config":{"ExposedPorts":["80/tcp"]},
               "rootfs":{"type":"layers","diff_ids":[]}})",
        R"({"os":"linux","architecture":"amd64","config":[],
               "rootfs":{"type":"layers","diff_ids":[]}})",
        "null", ""}) {
    auto r = parseConfig(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument) << bad;
  }
  Limits small;
  small.max_layers = 1;
  EXPECT_EQ(parseConfig(kConfig, small).error().code(), Errc::kResourceExhausted);
}

TEST(ManifestTest, CheckConfig) {
  auto c = parseConfig(kConfig);
  auto doc = parse(ociManifest());
  ASSERT_TRUE(c && doc);
  const auto& m = std::get<Manifest>(*doc);
  auto count = checkConfig(m, *c);
  ASSERT_FALSE(count);
  EXPECT_NE(count.error().message().find("2 layer diff_ids but the manifest has 3"),
            std::string::npos);
  Manifest two = m;
  two.layers.pop_back();
  EXPECT_TRUE(checkConfig(two, *c));
  auto arm = checkConfig(two, *c, {"linux", "arm64", ""});
  ASSERT_FALSE(arm);
  EXPECT_EQ(arm.error().code(), Errc::kUnsupported);
  EXPECT_NE(arm.error().message().find("built for linux/amd64, not linux/arm64"),
            std::string::npos);
}

TEST(DigestTest, Verify) {
  EXPECT_EQ(sha256Digest(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_TRUE(verifyDigest(sha256Digest("abc"), "abc"));
  auto wrong = verifyDigest(sha256Digest("abc"), "abd");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message().find("pull the image again"), std::string::npos);
  EXPECT_FALSE(verifyDigest("sha512:abc", "abc"));
  EXPECT_FALSE(verifyDigest("sha256:" + std::string(64, 'G'), "abc"));
  Sha256 h;
  h.update("a");
  h.update("bc");
  EXPECT_EQ(h.finish(), sha256Digest("abc"));
}

}  // namespace
}  // namespace hutch::image

#include "image/image_archive.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "image/digest.h"
#include "image/test_tar.h"

namespace hutch::image {
namespace {

using json = nlohmann::json;
using testing::TarEntry;

// An archive being put together: blobs by digest, then index.json or manifest.json.
struct Archive {
  std::vector<TarEntry> entries;

  json blob(const std::string& data, std::string_view media_type) {
    std::string digest = sha256Digest(data);
    entries.push_back(testing::file("blobs/sha256/" + std::string(digestHex(digest)), data));
    return {{"mediaType", media_type}, {"digest", digest}, {"size", data.size()}};
  }
  // One image of one layer; its manifest's descriptor (its layer's in `layer` when asked).
  // `size_delta`: the manifest's descriptor of the layer says that many bytes more.
  json image(const std::string& arch = "amd64", json* layer_out = nullptr, int size_delta = 0) {
    std::string tar = testing::makeTar({testing::file("hello", "hi " + arch + "\n")});
    json layer = blob(tar, media::kOciLayer);
    if (layer_out != nullptr) *layer_out = layer;
    layer["size"] = layer["size"].get<int>() + size_delta;
    json config = {{"os", "linux"},
                   {"architecture", arch},
                   {"rootfs", {{"type", "layers"}, {"diff_ids", {sha256Digest(tar)}}}}};
    json c = blob(config.dump(), media::kOciConfig);
    json manifest = {{"schemaVersion", 2},
                     {"mediaType", media::kOciManifest},
                     {"config", c},
                     {"layers", {layer}}};
    return blob(manifest.dump(), media::kOciManifest);
  }
  static json named(json d, const std::string& name) {
    d["annotations"] = {{"org.opencontainers.image.ref.name", name}};
    return d;
  }
  void index(const std::vector<json>& manifests) {
    entries.push_back(testing::file("oci-layout", R"({"imageLayoutVersion":"1.0.0"})"));
    entries.push_back(
        testing::file("index.json", json{{"schemaVersion", 2}, {"manifests", manifests}}.dump()));
  }
  std::string tar(Compression c = Compression::kNone) const { return testing::makeTar(entries, c); }
};

// A `docker save` archive as Docker before 25 writes it: <id>.json configs, <dir>/layer.tar
// layers, a layer shared by two images linked to the first (skopeo's docker-archive does the
// same), manifest.json listing them.
Archive dockerSave() {
  Archive a;
  std::string tar = testing::makeTar({testing::file("hello", "hi\n")});
  json manifest = json::array();
  for (const std::string tag : {"busybox:latest", "registry.example:5000/team/app:1"}) {
    json config = {{"os", "linux"},
                   {"architecture", "amd64"},
                   {"config", {{"Env", {"TAG=" + tag}}}},
                   {"rootfs", {{"type", "layers"}, {"diff_ids", {sha256Digest(tar)}}}}};
    std::string text = config.dump();
    std::string id(digestHex(sha256Digest(text)));
    a.entries.push_back(testing::file(id + ".json", text));
    std::string dir = id.substr(0, 12);
    if (manifest.empty()) {
      a.entries.push_back(testing::dir(dir));
      a.entries.push_back(testing::file(dir + "/layer.tar", tar));
    } else {
      a.entries.push_back(testing::symlink(dir + "/layer.tar",
                                           "../" + manifest[0]["Layers"][0].get<std::string>()));
    }
    manifest.push_back(
        {{"Config", id + ".json"}, {"RepoTags", {tag}}, {"Layers", {dir + "/layer.tar"}}});
  }
  a.entries.push_back(testing::file("manifest.json", manifest.dump()));
  return a;
}

struct Read {
  ArchiveScan scan;
  ArchiveListing listing;
};

Result<Read> read(const std::string& bytes, ArchiveScanOptions options = {.verify_blobs = true}) {
  UniqueFd fd = testing::memfdOf(bytes);
  HUTCH_TRY(ArchiveScan scan, scanImageArchive(fd.get(), "the archive", options));
  HUTCH_TRY(ArchiveListing listing, listArchiveImages(scan, "the archive"));
  return Read{std::move(scan), std::move(listing)};
}

Result<> readAndCheck(const std::string& bytes, std::string_view want = "") {
  HUTCH_TRY(Read r, read(bytes));
  HUTCH_TRY(ArchivedImage image, chooseArchiveImage(r.listing, want, "the archive"));
  return checkArchiveImage(r.scan, r.listing, image, "the archive");
}

std::string messageOf(const Result<>& r) {
  return r ? "" : r.error().message();
}

TEST(ImageArchiveTest, AnOciArchiveOfOneImageGoesToSkopeoWhole) {
  Archive a;
  json m = a.image();
  a.index({Archive::named(m, "app:1")});
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZstd}) {
    auto r = read(a.tar(c));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->listing.format, ArchiveFormat::kOciArchive);
    ASSERT_EQ(r->listing.images.size(), 1u);
    EXPECT_EQ(r->listing.images[0].names, std::vector<std::string>{"app:1"});
    EXPECT_EQ(r->listing.images[0].digest, m["digest"]);
    auto image = chooseArchiveImage(r->listing, "", "the archive");
    ASSERT_TRUE(image);
    EXPECT_TRUE(checkArchiveImage(r->scan, r->listing, *image, "the archive"));
    EXPECT_EQ(archiveSource(r->listing, *image, "/s/oci/tmp/job-1/archive").value_or(""),
              "oci-archive:/s/oci/tmp/job-1/archive");
  }
  // JSON documents are kept, layers are not.
  auto r = read(a.tar());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->scan.documents.size(), 4u);  // index.json, oci-layout, manifest, config
}

TEST(ImageArchiveTest, AnIndexIsNarrowedToLinuxAmd64) {
  Archive a;
  json amd = a.image("amd64");
  json arm = a.image("arm64");
  amd["platform"] = {{"os", "linux"}, {"architecture", "amd64"}};
  arm["platform"] = {{"os", "linux"}, {"architecture", "arm64"}};
  json index = a.blob(
      json{{"schemaVersion", 2}, {"mediaType", media::kOciIndex}, {"manifests", {arm, amd}}}.dump(),
      media::kOciIndex);
  a.index({index});
  EXPECT_TRUE(readAndCheck(a.tar())) << messageOf(readAndCheck(a.tar()));

  Archive only_arm;
  json m = only_arm.image("arm64");
  only_arm.index({m});
  auto refused = readAndCheck(only_arm.tar());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Errc::kUnsupported);
  EXPECT_NE(refused.error().message().find("linux/arm64"), std::string::npos)
      << refused.error().message();
}

TEST(ImageArchiveTest, ADockerSaveArchiveOfTwoImagesNeedsOneNamed) {
  Archive a = dockerSave();
  auto r = read(a.tar(Compression::kGzip));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->listing.format, ArchiveFormat::kDockerArchive);
  ASSERT_EQ(r->listing.images.size(), 2u);
  EXPECT_TRUE(r->listing.images[0].digest.starts_with("sha256:"));

  auto ambiguous = chooseArchiveImage(r->listing, "", "the archive");
  ASSERT_FALSE(ambiguous);
  EXPECT_EQ(ambiguous.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(ambiguous.error().message().find("holds 2 images: @0 busybox:latest (sha256:"),
            std::string::npos)
      << ambiguous.error().message();
  EXPECT_NE(ambiguous.error().message().find("--image"), std::string::npos);

  // Names as image references: "busybox" is docker.io/library/busybox:latest.
  for (const auto& [want, index] :
       std::vector<std::pair<std::string, size_t>>{{"busybox", 0},
                                                   {"docker.io/library/busybox:latest", 0},
                                                   {"registry.example:5000/team/app:1", 1},
                                                   {"@1", 1}}) {
    auto image = chooseArchiveImage(r->listing, want, "the archive");
    ASSERT_TRUE(image) << want << ": " << image.error().message();
    EXPECT_EQ(image->index, index) << want;
    EXPECT_TRUE(checkArchiveImage(r->scan, r->listing, *image, "the archive"))
        << want;  // the second's layer is a symlink to the first's
    EXPECT_EQ(archiveSource(r->listing, *image, "/t/a").value_or(""),
              "docker-archive:/t/a:@" + std::to_string(index));
  }
  for (const std::string want : {"nope:1", "@2", "@x"}) {
    auto missing = chooseArchiveImage(r->listing, want, "the archive");
    ASSERT_FALSE(missing) << want;
    EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    EXPECT_NE(missing.error().message().find("it holds @0 busybox:latest"), std::string::npos)
        << missing.error().message();
  }
}

TEST(ImageArchiveTest, HostileEntriesAreRefusedAndNamed) {
  Archive base;
  base.index({base.image()});
  struct Case {
    std::string label;
    TarEntry extra;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"climbs", testing::file("../../etc/cron.d/x", "* * * * * root sh\n"),
       "its entry ../../etc/cron.d/x is named outside the archive"},
      {"absolute", testing::file("/etc/passwd", "x"), "its entry /etc/passwd is named outside"},
      {"hardlink", testing::hardlink("blobs/x", "/etc/shadow"), "blobs/x (a hard link)"},
      {"device", TarEntry{.name = "dev/sda", .kind = TarEntry::Kind::kCharDev},
       "dev/sda (a character device)"},
      {"fifo", TarEntry{.name = "fifo", .kind = TarEntry::Kind::kFifo}, "fifo (a FIFO)"},
      {"symlink", testing::symlink("blobs/sha256/evil", "/etc"),
       "it holds the symlink blobs/sha256/evil"},
      {"duplicate", testing::file("index.json", "{}"), "it holds index.json twice"},
      {"altered", testing::file("blobs/sha256/" + std::string(64, 'a'), "not what it says"),
       "does not hold what its digest says"},
  };
  for (const Case& c : cases) {
    Archive a = base;
    a.entries.push_back(c.extra);
    auto r = read(a.tar());
    ASSERT_FALSE(r) << c.label;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument) << c.label;
    EXPECT_NE(r.error().message().find(c.expected), std::string::npos)
        << c.label << ": " << r.error().message();
  }
}

TEST(ImageArchiveTest, MissingOrWrongBlobsAreNamed) {
  json layer;
  Archive missing;
  missing.index({missing.image("amd64", &layer)});
  std::erase_if(missing.entries, [&](const TarEntry& e) {
    return e.name == "blobs/sha256/" + std::string(digestHex(layer["digest"].get<std::string>()));
  });
  std::string m = messageOf(readAndCheck(missing.tar()));
  EXPECT_NE(m.find("it lacks the blob " + layer["digest"].get<std::string>() + " (a layer"),
            std::string::npos)
      << m;

  // A layer whose descriptor gives another size (a blob cut short, or one grown).
  Archive resized;
  resized.index({resized.image("amd64", nullptr, 1)});
  m = messageOf(readAndCheck(resized.tar()));
  EXPECT_NE(m.find("bytes; its descriptor says"), std::string::npos) << m;

  // A docker save whose manifest.json names a layer the archive lacks, or a symlink out of it.
  Archive docker = dockerSave();
  std::erase_if(docker.entries, [](const TarEntry& e) { return e.name.ends_with("/layer.tar"); });
  m = messageOf(readAndCheck(docker.tar(), "busybox"));
  EXPECT_NE(m.find("/layer.tar (a layer)"), std::string::npos) << m;
  Archive escaping = dockerSave();
  for (TarEntry& e : escaping.entries) {
    if (e.kind == TarEntry::Kind::kSymlink) e.link = "../../../../etc/shadow";
  }
  m = messageOf(readAndCheck(escaping.tar(), "@1"));
  EXPECT_NE(m.find("outside the archive"), std::string::npos) << m;
}

TEST(ImageArchiveTest, TheArchiveIsBoundedInEntriesAndBytes) {
  Archive a;
  a.index({a.image()});
  auto entries = read(a.tar(), {.max_entries = 3, .verify_blobs = true});
  ASSERT_FALSE(entries);
  EXPECT_EQ(entries.error().code(), Errc::kResourceExhausted);
  auto bytes = read(a.tar(), {.max_total_bytes = 100, .verify_blobs = true});
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().code(), Errc::kResourceExhausted);
  EXPECT_NE(bytes.error().message().find("the limit of an image archive"), std::string::npos);
  // Over the documents' budget, a JSON file is not kept (and so is "too large").
  auto budget = read(a.tar(), {.max_documents_bytes = 10, .verify_blobs = true});
  ASSERT_FALSE(budget);
  EXPECT_NE(budget.error().message().find("index.json (the layout's index) is too large"),
            std::string::npos)
      << budget.error().message();
}

TEST(ImageArchiveTest, NotAnImageArchive) {
  for (const auto& [bytes, expected] : std::vector<std::pair<std::string, std::string>>{
           {"hello, not a tar\n", "is not a tar archive"},
           {testing::makeTar({testing::file("etc/passwd", "root:x:0:0")}),
            "neither a `docker save` archive"},
           {testing::makeTar({testing::file("repositories", "{}")}), "Docker before 1.10"},
           {testing::makeTar({testing::file("manifest.json", "[]")}), "lists no image"},
           {testing::makeTar({testing::file("index.json", "{\"manifests\": 1}")}),
            "index.json is not an image index"}}) {
    auto r = read(bytes);
    ASSERT_FALSE(r) << expected;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(r.error().message().find(expected), std::string::npos) << r.error().message();
  }
  Archive a;
  a.index({a.image()});
  std::string truncated = a.tar(Compression::kGzip);
  truncated.resize(truncated.size() / 2);
  auto r = read(truncated);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("truncated"), std::string::npos) << r.error().message();
}

TEST(ImageArchiveTest, SkopeoCanOnlyPickANamedImageOfSeveral) {
  Archive a;
  json one = a.image("amd64");
  a.index(
      {Archive::named(one, "one"), one, Archive::named(one, "twin"), Archive::named(one, "twin")});
  auto r = read(a.tar());
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(archiveSource(r->listing, r->listing.images[0], "/t/a").value_or(""),
            "oci-archive:/t/a:one");
  auto unnamed = archiveSource(r->listing, r->listing.images[1], "/t/a");
  ASSERT_FALSE(unnamed);
  EXPECT_NE(unnamed.error().message().find("has no name"), std::string::npos);
  auto twins = chooseArchiveImage(r->listing, "twin", "the archive");
  ASSERT_FALSE(twins);
  EXPECT_NE(twins.error().message().find("holds 2 images named twin"), std::string::npos);
  EXPECT_FALSE(archiveSource(r->listing, r->listing.images[2], "/t/a"));
  EXPECT_FALSE(archiveSource(r->listing, r->listing.images[0], "/t/a:b"));
}

}  // namespace
}  // namespace hutch::image

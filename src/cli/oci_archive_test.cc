#include "cli/oci_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"

namespace hutch::cli {
namespace {

using json = nlohmann::json;
using Files = std::vector<std::pair<std::string, std::string>>;  // name, content

// A tar (optionally gzip-compressed) holding `files`, in memory.
std::string makeTar(const Files& files, bool gzip = false) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (gzip) archive_write_add_filter_gzip(a);
  std::string out(1 << 20, '\0');
  size_t used = 0;
  EXPECT_EQ(archive_write_open_memory(a, out.data(), out.size(), &used), ARCHIVE_OK);
  for (const auto& [name, content] : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    EXPECT_EQ(archive_write_header(a, e), ARCHIVE_OK);
    EXPECT_EQ(archive_write_data(a, content.data(), content.size()),
              static_cast<la_ssize_t>(content.size()));
    archive_entry_free(e);
  }
  EXPECT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
  out.resize(used);
  return out;
}

// Every regular file of the tar in `data`, by name.
std::map<std::string, std::string> readTar(const std::string& data) {
  std::map<std::string, std::string> files;
  archive* a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_memory(a, data.data(), data.size()), ARCHIVE_OK);
  archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string content(static_cast<size_t>(archive_entry_size(e)), '\0');
    archive_read_data(a, content.data(), content.size());
    files[archive_entry_pathname(e)] = content;
  }
  archive_read_free(a);
  return files;
}

UniqueFd memFile(const std::string& data) {
  UniqueFd fd(::memfd_create("oci-test", MFD_CLOEXEC));
  EXPECT_TRUE(fd);
  EXPECT_EQ(::write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  return fd;
}

std::string readAll(int fd) {
  ::lseek(fd, 0, SEEK_SET);
  std::string out;
  char buf[65536];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Digests are names here: nothing in the conversion checks them (docker load does).
std::string digest(char c) {
  return "sha256:" + std::string(64, c);
}
std::string blob(char c) {
  return "blobs/sha256/" + std::string(64, c);
}

json descriptor(const std::string& media_type, char c, json extra = json::object()) {
  json d = {{"mediaType", media_type}, {"digest", digest(c)}, {"size", 1}};
  d.update(extra);
  return d;
}

constexpr const char* kManifestType = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kIndexType = "application/vnd.oci.image.index.v1+json";

// A one-layer image: layer 'a' (a tar holding /hello), config 'c', manifest 'm'.
Files oneImageLayout(const json& index_annotations) {
  std::string layer = makeTar({{"hello", "hi\n"}}, true);
  json config = {{"architecture", "amd64"},
                 {"os", "linux"},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", {digest('d')}}}}};
  json manifest = {{"schemaVersion", 2},
                   {"mediaType", kManifestType},
                   {"config", descriptor("application/vnd.oci.image.config.v1+json", 'c')},
                   {"layers", {descriptor("application/vnd.oci.image.layer.v1.tar+gzip", 'a')}}};
  json top = descriptor(kManifestType, 'e');
  if (!index_annotations.empty()) top["annotations"] = index_annotations;
  json index = {{"schemaVersion", 2}, {"manifests", {top}}};
  return {{"oci-layout", R"({"imageLayoutVersion":"1.0.0"})"},
          {"index.json", index.dump()},
          {blob('a'), layer},
          {blob('c'), config.dump()},
          {blob('e'), manifest.dump()}};
}

TEST(OciArchiveTest, ConvertsAnOciLayoutIntoADockerSaveArchive) {
  for (bool gzip : {false, true}) {
    Files layout = oneImageLayout({{"org.opencontainers.image.ref.name", "busybox:1.36"}});
    UniqueFd fd = memFile(makeTar(layout, gzip));
    auto archive = inspectImageArchive(fd.get(), "image.tar");
    ASSERT_TRUE(archive) << archive.error().message();
    EXPECT_EQ(archive->format, ImageArchive::Format::kOciLayout);
    ASSERT_EQ(archive->images.size(), 1u);
    EXPECT_EQ(archive->images[0], (DockerImageEntry{blob('c'), {"busybox:1.36"}, {blob('a')}}));

    UniqueFd out = memFile("");
    ASSERT_TRUE(writeDockerArchive(fd.get(), archive->images, out.get()));
    auto files = readTar(readAll(out.get()));
    ASSERT_TRUE(files.contains("manifest.json"));
    json manifest = json::parse(files["manifest.json"]);
    EXPECT_EQ(manifest, json::parse(R"([{"Config": ")" + blob('c') +
                                    R"(", "RepoTags": ["busybox:1.36"], "Layers": [")" + blob('a') +
                                    R"("]}])"));
    // The blobs come across byte for byte: the layer is still the gzip tar holding /hello.
    std::map<std::string, std::string> original(layout.begin(), layout.end());
    EXPECT_EQ(files[blob('a')], original[blob('a')]);
    EXPECT_EQ(readTar(files[blob('a')])["hello"], "hi\n");
    EXPECT_EQ(files[blob('c')], original[blob('c')]);
  }
}

TEST(OciArchiveTest, NamesTheImageFromItsRefNameAnnotation) {
  struct Case {
    std::string ref;
    std::vector<std::string> tags;
  };
  for (const Case& c :
       std::vector<Case>{{"1.0", {"oci-image:1.0"}},
                         {"latest", {"oci-image:latest"}},
                         {"example.com:5000/team/app:v2", {"example.com:5000/team/app:v2"}},
                         {"team/app", {"team/app:latest"}},
                         {"", {}}}) {
    json annotations = json::object();
    if (!c.ref.empty()) annotations["org.opencontainers.image.ref.name"] = c.ref;
    UniqueFd fd = memFile(makeTar(oneImageLayout(annotations)));
    auto archive = inspectImageArchive(fd.get(), "image.tar");
    ASSERT_TRUE(archive) << c.ref << ": " << archive.error().message();
    EXPECT_EQ(archive->images.at(0).repo_tags, c.tags) << c.ref;
  }
  UniqueFd bad =
      memFile(makeTar(oneImageLayout({{"org.opencontainers.image.ref.name", "Bad Name:x"}})));
  auto archive = inspectImageArchive(bad.get(), "image.tar");
  ASSERT_FALSE(archive);
  EXPECT_NE(archive.error().message().find("'Bad Name:x'"), std::string::npos);
}

TEST(OciArchiveTest, FollowsANestedIndexToTheLinuxAmd64Image) {
  // index.json -> index 'i' (arm64 manifest 'f', amd64 manifest 'e'); only amd64's blobs are sent.
  Files layout = oneImageLayout({});
  json arm = {{"schemaVersion", 2},
              {"config", descriptor("application/vnd.oci.image.config.v1+json", 'b')},
              {"layers", {descriptor("application/vnd.oci.image.layer.v1.tar", '9')}}};
  json nested = {{"schemaVersion", 2},
                 {"mediaType", kIndexType},
                 {"manifests",
                  {descriptor(kManifestType, 'f',
                              {{"platform", {{"os", "linux"}, {"architecture", "arm64"}}}}),
                   descriptor(kManifestType, 'e',
                              {{"platform", {{"os", "linux"}, {"architecture", "amd64"}}}})}}};
  json index = {
      {"schemaVersion", 2},
      {"manifests",
       {descriptor(kIndexType, '1',
                   {{"annotations", {{"org.opencontainers.image.ref.name", "app:multi"}}}})}}};
  layout[1].second = index.dump();
  layout.emplace_back(blob('1'), nested.dump());
  layout.emplace_back(blob('f'), arm.dump());
  layout.emplace_back(blob('b'), "{}");
  layout.emplace_back(blob('9'), "arm64 layer");
  UniqueFd fd = memFile(makeTar(layout));
  auto archive = inspectImageArchive(fd.get(), "image.tar");
  ASSERT_TRUE(archive) << archive.error().message();
  ASSERT_EQ(archive->images.size(), 1u);
  EXPECT_EQ(archive->images[0], (DockerImageEntry{blob('c'), {"app:multi"}, {blob('a')}}));

  UniqueFd out = memFile("");
  ASSERT_TRUE(writeDockerArchive(fd.get(), archive->images, out.get()));
  auto files = readTar(readAll(out.get()));
  EXPECT_EQ(files.size(), 3u);  // manifest.json, config, layer
  EXPECT_FALSE(files.contains(blob('9')));
}

TEST(OciArchiveTest, RefusesSeveralPlatformsWithoutLinuxAmd64) {
  Files layout = oneImageLayout({});
  json index = {{"schemaVersion", 2},
                {"manifests",
                 {descriptor(kManifestType, 'e',
                             {{"platform", {{"os", "linux"}, {"architecture", "arm64"}}}}),
                  descriptor(kManifestType, 'e',
                             {{"platform", {{"os", "linux"}, {"architecture", "s390x"}}}})}}};
  layout[1].second = index.dump();
  UniqueFd fd = memFile(makeTar(layout));
  auto archive = inspectImageArchive(fd.get(), "image.tar");
  ASSERT_FALSE(archive);
  EXPECT_EQ(archive.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(
      archive.error().message().find("no linux/amd64 image (it has: linux/arm64, linux/s390x)"),
      std::string::npos)
      << archive.error().message();
}

TEST(OciArchiveTest, TakesADockerSaveArchiveAsItIs) {
  UniqueFd fd = memFile(makeTar({{"manifest.json", "[]"}, {"index.json", "{}"}}));
  auto archive = inspectImageArchive(fd.get(), "saved.tar");
  ASSERT_TRUE(archive) << archive.error().message();
  EXPECT_EQ(archive->format, ImageArchive::Format::kDockerSave);
}

TEST(OciArchiveTest, ExplainsWhatIsWrongWithAnArchive) {
  struct Case {
    std::string name;
    std::string data;
    std::string expected;
  };
  Files missing_layer = oneImageLayout({});
  missing_layer.erase(missing_layer.begin() + 2);  // blob 'a'
  Files bad_json = oneImageLayout({});
  bad_json[1].second = "{not json";
  std::string truncated = makeTar(oneImageLayout({}), true);
  truncated.resize(truncated.size() / 2);
  for (const Case& c : std::vector<Case>{
           {"text", "hello, I am not an archive\n", "text is not a tar archive"},
           {"empty", "", "empty is not a tar archive"},
           {"other", makeTar({{"etc/passwd", "root:x:0:0"}}),
            "other is neither a `docker save` archive (no manifest.json) nor an OCI image layout "
            "(no index.json)"},
           {"missing", makeTar(missing_layer), "it lacks the blob " + digest('a') + " (a layer"},
           {"badjson", makeTar(bad_json), "index.json (the layout's index) is not a JSON object"},
           {"truncated", truncated, "truncated"}}) {
    UniqueFd fd = memFile(c.data);
    auto archive = inspectImageArchive(fd.get(), c.name);
    ASSERT_FALSE(archive) << c.name;
    EXPECT_EQ(archive.error().code(), Errc::kInvalidArgument) << c.name;
    EXPECT_NE(archive.error().message().find(c.expected), std::string::npos)
        << c.name << ": " << archive.error().message();
  }
}

}  // namespace
}  // namespace hutch::cli

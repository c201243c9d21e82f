#include "cli/oci_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "image/image_archive.h"

namespace hutch::cli {

namespace {

using json = nlohmann::json;

constexpr size_t kChunk = 256 * 1024;

constexpr const char* kRefName = "org.opencontainers.image.ref.name";

struct WriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};
using WriteArchive = std::unique_ptr<archive, WriteFree>;
using image::ArchiveScan;
using image::normalTarName;
using image::tarError;

bool isIndexType(const std::string& media_type) {
  return media_type == "application/vnd.oci.image.index.v1+json" ||
         media_type == "application/vnd.docker.distribution.manifest.list.v2+json";
}

// Everything below reads one OCI layout.
class LayoutReader {
 public:
  LayoutReader(const ArchiveScan& contents, const std::string& name)
      : contents_(contents), name_(name) {}

  Result<std::vector<DockerImageEntry>> images() {
    HUTCH_TRY(json index, document("index.json", "the layout's index"));
    if (!index.contains("manifests") || !index["manifests"].is_array() ||
        index["manifests"].empty()) {
      return fail(invalid("its index.json lists no images (no \"manifests\")"));
    }
    // Entries with the same ref name are one image in several platforms.
    std::vector<std::string> order;
    std::map<std::string, std::vector<json>> by_ref;
    for (const json& d : index["manifests"]) {
      std::string ref = annotation(d, kRefName);
      if (!by_ref.contains(ref)) order.push_back(ref);
      by_ref[ref].push_back(d);
    }
    std::vector<DockerImageEntry> out;
    for (const std::string& ref : order) {
      HUTCH_TRY(json chosen, choosePlatform(by_ref[ref], "index.json"));
      HUTCH_TRY(DockerImageEntry image, resolve(chosen, true));
      if (!ref.empty()) {
        HUTCH_TRY(std::string tag, repoTag(ref));
        image.repo_tags.push_back(tag);
      }
      out.push_back(std::move(image));
    }
    return out;
  }

 private:
  Error invalid(const std::string& what) const {
    return Error(Errc::kInvalidArgument,
                 fmt::format("{} is not a loadable OCI image layout: {}", name_, what));
  }

  static std::string annotation(const json& descriptor, const char* key) {
    if (!descriptor.contains("annotations") || !descriptor["annotations"].is_object()) return "";
    const json& a = descriptor["annotations"];
    return a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : "";
  }

  Result<json> document(const std::string& path, const std::string& what) const {
    auto it = contents_.documents.find(path);
    if (it == contents_.documents.end()) {
      if (contents_.files.contains(path)) {
        return fail(invalid(fmt::format("{} ({}) is too large to be JSON", path, what)));
      }
      return fail(invalid(fmt::format("it lacks {} ({}): export the image again", path, what)));
    }
    json j = json::parse(it->second, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return fail(invalid(fmt::format("{} ({}) is not a JSON object", path, what)));
    }
    return j;
  }

  // "sha256:<hex>" -> "blobs/sha256/<hex>", present in the archive.
  Result<std::string> blobPath(const json& descriptor, const std::string& what) const {
    if (!descriptor.is_object() || !descriptor.contains("digest") ||
        !descriptor["digest"].is_string()) {
      return fail(invalid(fmt::format("a descriptor of {} has no digest", what)));
    }
    static const std::regex kDigest("([a-z0-9]+(?:[+._-][a-z0-9]+)*):([a-fA-F0-9]{32,})");
    std::string digest = descriptor["digest"].get<std::string>();
    std::smatch m;
    if (!std::regex_match(digest, m, kDigest)) {
      return fail(invalid(fmt::format("'{}' ({}) is not a digest", digest, what)));
    }
    std::string path = fmt::format("blobs/{}/{}", m[1].str(), m[2].str());
    if (!contents_.files.contains(path)) {
      return fail(
          invalid(fmt::format("it lacks the blob {} ({}, expected at {}): export the "
                              "image again with all its blobs",
                              digest, what, path)));
    }
    return path;
  }

  static std::string platformText(const json& d) {
    if (!d.contains("platform") || !d["platform"].is_object()) return "no platform";
    const json& p = d["platform"];
    std::string text = fmt::format("{}/{}", p.value("os", "?"), p.value("architecture", "?"));
    if (p.contains("variant") && p["variant"].is_string())
      text += "/" + p["variant"].get<std::string>();
    return text;
  }

  // One descriptor of several: the only one, or the linux/amd64 one.
  Result<json> choosePlatform(const std::vector<json>& descriptors, const std::string& where) {
    if (descriptors.size() == 1) return descriptors[0];
    std::vector<std::string> seen;
    for (const json& d : descriptors) {
      if (d.contains("platform") && d["platform"].is_object() &&
          d["platform"].value("os", "") == "linux" &&
          d["platform"].value("architecture", "") == "amd64") {
        return d;
      }
      seen.push_back(platformText(d));
    }
    return fail(
        invalid(fmt::format("{} offers no linux/amd64 image (it has: {}); export the "
                            "image for linux/amd64",
                            where, fmt::join(seen, ", "))));
  }

  // An image manifest, or an index of them (followed once when `nested_ok`).
  Result<DockerImageEntry> resolve(const json& descriptor, bool nested_ok) {
    HUTCH_TRY(std::string path, blobPath(descriptor, "an image manifest"));
    HUTCH_TRY(json doc, document(path, "an image manifest"));
    std::string media_type = descriptor.value("mediaType", doc.value("mediaType", ""));
    if (isIndexType(media_type) || doc.contains("manifests")) {
      if (!nested_ok)
        return fail(invalid(fmt::format("{} nests indexes more than one deep", path)));
      if (!doc["manifests"].is_array() || doc["manifests"].empty()) {
        return fail(invalid(fmt::format("the index {} lists no manifests", path)));
      }
      std::vector<json> list(doc["manifests"].begin(), doc["manifests"].end());
      HUTCH_TRY(json chosen, choosePlatform(list, path));
      return resolve(chosen, false);
    }
    if (!doc.contains("config") || !doc.contains("layers") || !doc["layers"].is_array()) {
      return fail(invalid(fmt::format("{} is not an image manifest (no config or layers)", path)));
    }
    DockerImageEntry image;
    HUTCH_TRY(image.config, blobPath(doc["config"], "an image config"));
    for (const json& layer : doc["layers"]) {
      HUTCH_TRY(std::string layer_path, blobPath(layer, "a layer"));
      image.layers.push_back(std::move(layer_path));
    }
    return image;
  }

  // The ref name annotation as docker's "name:tag".
  Result<std::string> repoTag(const std::string& ref) const {
    static const std::regex kTag(R"([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})");
    static const std::regex kName(
        R"((?:(?:[A-Za-z0-9-]+\.)+[A-Za-z0-9-]+(?::[0-9]+)?/|[A-Za-z0-9-]+:[0-9]+/|localhost/)?)"
        R"([a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)");
    std::string name;
    std::string tag;
    size_t colon = ref.rfind(':');
    size_t slash = ref.rfind('/');
    if (ref.find('@') != std::string::npos) {
      name = "";  // a digest reference cannot be a docker tag
    } else if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
      name = ref.substr(0, colon);
      tag = ref.substr(colon + 1);
    } else if (slash != std::string::npos) {
      name = ref;
      tag = "latest";
    } else {
      name = "oci-image";
      tag = ref;
    }
    if (name.empty() || !std::regex_match(tag, kTag) || !std::regex_match(name, kName)) {
      return fail(
          invalid(fmt::format("its {} annotation '{}' is not a docker name:tag or tag; "
                              "fix the annotation in index.json",
                              kRefName, ref)));
    }
    return name + ":" + tag;
  }

  const ArchiveScan& contents_;
  const std::string& name_;
};

}  // namespace

Result<ImageArchive> inspectImageArchive(int fd, const std::string& name) {
  HUTCH_TRY(ArchiveScan contents, image::scanImageArchive(fd, name));
  ImageArchive result;
  // manifest.json: docker save; repositories alone: the pre-1.10 docker save format.
  if (contents.files.contains("manifest.json") || contents.files.contains("repositories")) {
    result.format = ImageArchive::Format::kDockerSave;
    return result;
  }
  if (!contents.files.contains("index.json")) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} is neither a `docker save` archive (no manifest.json) nor an OCI "
                            "image layout (no index.json): give one of those as a tar",
                            name));
  }
  result.format = ImageArchive::Format::kOciLayout;
  HUTCH_TRY(result.images, LayoutReader(contents, name).images());
  return result;
}

std::string dockerManifestJson(const std::vector<DockerImageEntry>& images) {
  json out = json::array();
  for (const DockerImageEntry& image : images) {
    out.push_back(
        {{"Config", image.config}, {"RepoTags", image.repo_tags}, {"Layers", image.layers}});
  }
  return out.dump();
}

Result<> writeDockerArchive(int fd, const std::vector<DockerImageEntry>& images, int out) {
  std::set<std::string> wanted;
  for (const DockerImageEntry& image : images) {
    wanted.insert(image.config);
    wanted.insert(image.layers.begin(), image.layers.end());
  }
  WriteArchive w(archive_write_new());
  archive_write_set_format_pax_restricted(w.get());
  archive_write_set_bytes_in_last_block(w.get(), 1);
  if (archive_write_open_fd(w.get(), out) != ARCHIVE_OK) {
    return fail(Errc::kInternal, "Cannot start the archive: " + tarError(w.get()));
  }
  auto writeError = [&](archive* a) {
    int err = archive_errno(a);
    return Error(Errc::kInternal, "Cannot send the image archive: " + tarError(a),
                 err > 0 ? err : 0);
  };
  auto header = [&](const std::string& path, la_int64_t size, time_t mtime) -> Result<> {
    std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), path.c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_size(e.get(), size);
    archive_entry_set_mtime(e.get(), mtime, 0);
    if (archive_write_header(w.get(), e.get()) != ARCHIVE_OK) return fail(writeError(w.get()));
    return ok();
  };

  std::string manifest = dockerManifestJson(images);
  HUTCH_TRY_VOID(header("manifest.json", static_cast<la_int64_t>(manifest.size()), 0));
  if (archive_write_data(w.get(), manifest.data(), manifest.size()) < 0) {
    return fail(writeError(w.get()));
  }

  HUTCH_TRY(image::TarReader r, image::openTar(fd, "the image archive"));
  std::vector<char> buf(kChunk);
  archive_entry* entry = nullptr;
  while (true) {
    int rc = archive_read_next_header(r.get(), &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) {
      return fail(Errc::kInvalidArgument,
                  "The image archive changed while it was read: " + tarError(r.get()));
    }
    std::string path = normalTarName(archive_entry_pathname(entry));
    if (archive_entry_filetype(entry) != AE_IFREG || wanted.erase(path) == 0) continue;
    HUTCH_TRY_VOID(header(path, archive_entry_size(entry), archive_entry_mtime(entry)));
    while (true) {
      la_ssize_t n = archive_read_data(r.get(), buf.data(), buf.size());
      if (n < 0) {
        return fail(Errc::kInvalidArgument, fmt::format("Cannot read {} from the image archive: {}",
                                                        path, tarError(r.get())));
      }
      if (n == 0) break;
      if (archive_write_data(w.get(), buf.data(), static_cast<size_t>(n)) < 0) {
        return fail(writeError(w.get()));
      }
    }
  }
  if (!wanted.empty()) {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("The image archive changed while it was read: {} is gone", *wanted.begin()));
  }
  if (archive_write_close(w.get()) != ARCHIVE_OK) return fail(writeError(w.get()));
  return ok();
}

}  // namespace hutch::cli

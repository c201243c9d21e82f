#include "image/image_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/path_text.h"
#include "image/digest.h"
#include "image/reference.h"

namespace hutch::image {

namespace {

using nlohmann::json;

constexpr size_t kChunk = 256 * 1024;
constexpr const char* kRefName = "org.opencontainers.image.ref.name";
constexpr int kMaxLinkHops = 8;

// "blobs/sha256/<64 lowercase hex>": the digest it names, or empty.
std::string blobDigest(std::string_view path) {
  constexpr std::string_view kPrefix = "blobs/sha256/";
  if (!path.starts_with(kPrefix)) return "";
  std::string digest = "sha256:" + std::string(path.substr(kPrefix.size()));
  return isValidDigest(digest) ? digest : "";
}

std::string blobPath(std::string_view digest) {
  return fmt::format("blobs/sha256/{}", digestHex(digest));
}

// Absolute, or with a ".." component.
bool unsafeName(std::string_view name) {
  if (name.starts_with('/')) return true;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    if (name.substr(start, end - start) == "..") return true;
    start = end + 1;
  }
  return false;
}

std::string typeName(mode_t type) {
  switch (type) {
    case AE_IFCHR: return "a character device";
    case AE_IFBLK: return "a block device";
    case AE_IFIFO: return "a FIFO";
    case AE_IFSOCK: return "a socket";
    default: return "an entry of an unknown type";
  }
}

bool looksLikeJson(std::string_view data) {
  for (char c : data) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    return c == '{' || c == '[';
  }
  return false;
}

Error invalid(const std::string& name, const std::string& what) {
  return Error(Errc::kInvalidArgument,
               fmt::format("{} is not an image archive hutch can use: {}", name, what));
}

// The JSON document at `path`, or why there is none.
Result<std::string_view> document(const ArchiveScan& scan, const std::string& path,
                                  const std::string& what, const std::string& name) {
  auto it = scan.documents.find(path);
  if (it != scan.documents.end()) return std::string_view(it->second);
  if (scan.files.contains(path)) {
    return fail(invalid(name, fmt::format("{} ({}) is too large or not JSON", path, what)));
  }
  return fail(invalid(name, fmt::format("it lacks {} ({}); export the image again", path, what)));
}

// A blob a descriptor names: present, of the descriptor's size.
Result<std::string> descriptorBlob(const ArchiveScan& scan, const Descriptor& d,
                                   const std::string& what, const std::string& name) {
  std::string path = blobPath(d.digest);
  auto it = scan.files.find(path);
  if (it == scan.files.end()) {
    return fail(invalid(name, fmt::format("it lacks the blob {} ({}, expected at {}); export the "
                                          "image again with all its blobs",
                                          d.digest, what, path)));
  }
  if (it->second != static_cast<uint64_t>(d.size)) {
    return fail(invalid(name, fmt::format("the blob {} ({}) is {} bytes; its descriptor says {}",
                                          d.digest, what, it->second, d.size)));
  }
  return path;
}

// A JSON blob a descriptor names, its digest checked.
Result<std::string_view> descriptorDocument(const ArchiveScan& scan, const Descriptor& d,
                                            const std::string& what, const std::string& name) {
  HUTCH_TRY(std::string path, descriptorBlob(scan, d, what, name));
  HUTCH_TRY(std::string_view doc, document(scan, path, what, name));
  if (sha256Digest(doc) != d.digest) {
    return fail(invalid(
        name, fmt::format("the blob {} ({}) does not hold what its digest says", d.digest, what)));
  }
  return doc;
}

// A docker save path (a file, or a symlink inside the archive to one) as the file it names.
Result<std::string> resolveEntry(const ArchiveScan& scan, const std::string& path,
                                 const std::string& what, const std::string& name) {
  std::string at = path;
  for (int hop = 0; hop <= kMaxLinkHops; ++hop) {
    if (unsafeName(at)) {
      return fail(invalid(name, fmt::format("{} ({}) points outside the archive", path, what)));
    }
    if (scan.files.contains(at)) return at;
    auto link = scan.symlinks.find(at);
    if (link == scan.symlinks.end()) {
      return fail(
          invalid(name, fmt::format("it lacks {} ({}); export the image again", path, what)));
    }
    if (link->second.starts_with('/')) {
      return fail(invalid(name, fmt::format("{} ({}) is a symlink to {}, outside the archive", path,
                                            what, link->second)));
    }
    const size_t slash = at.rfind('/');
    const std::string joined =
        (slash == std::string::npos ? "" : at.substr(0, slash + 1)) + link->second;
    bool climbed = false;
    at = base::joinParts(base::lexicalParts(joined, &climbed), "");
    if (climbed) {
      return fail(invalid(name, fmt::format("{} ({}) is a symlink to {}, outside the archive", path,
                                            what, link->second)));
    }
  }
  return fail(invalid(
      name, fmt::format("{} ({}) is a chain of more than {} symlinks", path, what, kMaxLinkHops)));
}

// docker save's manifest.json, its entries checked for shape.
struct DockerEntry {
  std::string config;
  std::vector<std::string> repo_tags;
  std::vector<std::string> layers;
};

Result<std::vector<DockerEntry>> dockerEntries(const ArchiveScan& scan, const std::string& name) {
  HUTCH_TRY(std::string_view text, document(scan, "manifest.json", "the image list", name));
  json list = json::parse(text, nullptr, false);
  if (list.is_discarded() || !list.is_array()) {
    return fail(invalid(name, "its manifest.json is not a JSON array"));
  }
  if (list.empty()) return fail(invalid(name, "its manifest.json lists no image"));
  std::vector<DockerEntry> out;
  for (const json& e : list) {
    auto strings = [](const json& v) {
      if (!v.is_array()) return false;
      for (const json& s : v) {
        if (!s.is_string()) return false;
      }
      return true;
    };
    if (!e.is_object() || !e.contains("Config") || !e["Config"].is_string() ||
        !e.contains("Layers") || !strings(e["Layers"]) ||
        (e.contains("RepoTags") && !e["RepoTags"].is_null() && !strings(e["RepoTags"]))) {
      return fail(invalid(name, fmt::format("entry {} of its manifest.json is not an object with "
                                            "Config, Layers and RepoTags",
                                            out.size())));
    }
    DockerEntry entry;
    entry.config = normalTarName(e["Config"].get<std::string>().c_str());
    for (const json& l : e["Layers"])
      entry.layers.push_back(normalTarName(l.get_ref<const std::string&>().c_str()));
    if (e.contains("RepoTags") && e["RepoTags"].is_array()) {
      for (const json& t : e["RepoTags"]) entry.repo_tags.push_back(t.get<std::string>());
    }
    out.push_back(std::move(entry));
  }
  return out;
}

Result<Index> ociIndex(const ArchiveScan& scan, const std::string& name) {
  HUTCH_TRY(std::string_view text, document(scan, "index.json", "the layout's index", name));
  auto parsed = parseDocument(text, "");
  if (!parsed) {
    return fail(invalid(name, "its index.json is not an image index: " + parsed.error().message()));
  }
  const auto* index = std::get_if<Index>(&*parsed);
  if (index == nullptr) return fail(invalid(name, "its index.json is not an image index"));
  if (index->manifests.empty()) return fail(invalid(name, "its index.json lists no image"));
  return *index;
}

// Whether `want` names `have`: equal, or the same image reference once normalised.
bool sameName(std::string_view want, const std::string& have) {
  if (want == have) return true;
  auto a = parseReference(want);
  auto b = parseReference(have);
  return a && b && a->str() == b->str();
}

std::string listing(const ArchiveListing& l) {
  std::vector<std::string> items;
  for (const ArchivedImage& i : l.images) items.push_back(i.describe());
  return fmt::format("{}", fmt::join(items, ", "));
}

Result<ImageConfig> checkedConfig(std::string_view doc, const std::string& what,
                                  const Limits& limits) {
  auto config = parseConfig(doc, limits);
  if (!config) return fail(config.error().withContext(what));
  if (config->os != "linux" || config->architecture != "amd64") {
    return fail(Errc::kUnsupported,
                fmt::format("{} is an image for {}/{}; boxes run linux/amd64 images", what,
                            config->os, config->architecture));
  }
  return config;
}

}  // namespace

void TarReaderFree::operator()(archive* a) const {
  archive_read_free(a);
}

std::string tarError(archive* a) {
  const char* text = archive_error_string(a);
  return text != nullptr ? text : "unknown libarchive error";
}

std::string normalTarName(const char* raw) {
  std::string_view name = raw != nullptr ? raw : "";
  while (name.starts_with("./")) name.remove_prefix(2);
  return std::string(name);
}

Result<TarReader> openTar(int fd, const std::string& name) {
  if (::lseek(fd, 0, SEEK_SET) < 0) {
    return fail(sysError(fmt::format("Cannot read {} from its start", name), errno));
  }
  TarReader a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_fd(a.get(), fd, kChunk) != ARCHIVE_OK) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} is not a tar archive ({}): give a `docker save` archive or an OCI "
                            "image layout as a tar, plain or compressed",
                            name, tarError(a.get())));
  }
  return a;
}

Result<ArchiveScan> scanImageArchive(int fd, const std::string& name,
                                     const ArchiveScanOptions& options) {
  HUTCH_TRY(TarReader a, openTar(fd, name));
  ArchiveScan scan;
  size_t documents_bytes = 0;
  uint64_t entries = 0;
  uint64_t total = 0;
  std::vector<char> buf(kChunk);
  auto damaged = [&](const std::string& at) {
    return Error(Errc::kInvalidArgument,
                 fmt::format("{} is damaged or truncated{}: {}", name,
                             at.empty() ? "" : " at " + at, tarError(a.get())));
  };
  archive_entry* entry = nullptr;
  while (true) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) return fail(damaged(""));
    if (++entries > options.max_entries) {
      return fail(Errc::kResourceExhausted,
                  fmt::format("{} has more than {} entries; an image archive has a few per layer",
                              name, options.max_entries));
    }
    std::string path = normalTarName(archive_entry_pathname(entry));
    while (path.size() > 1 && path.ends_with('/')) path.pop_back();
    if (path.empty() || path == ".") continue;
    if (unsafeName(path)) {
      scan.unsafe.push_back(path);
      continue;
    }
    const mode_t type = archive_entry_filetype(entry);
    if (type == AE_IFDIR) continue;
    if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(entry);
      if (!scan.symlinks.emplace(path, target != nullptr ? target : "").second) {
        return fail(invalid(name, fmt::format("it holds {} twice", path)));
      }
      continue;
    }
    if (archive_entry_hardlink(entry) != nullptr) {
      scan.others.push_back(path + " (a hard link)");
      continue;
    }
    if (type != AE_IFREG) {
      scan.others.push_back(fmt::format("{} ({})", path, typeName(type)));
      continue;
    }
    const uint64_t size =
        archive_entry_size(entry) > 0 ? static_cast<uint64_t>(archive_entry_size(entry)) : 0;
    total += size;
    if (total > options.max_total_bytes) {
      return fail(Errc::kResourceExhausted,
                  fmt::format("{} holds more than {} MiB (unpacked), the limit of an image "
                              "archive",
                              name, options.max_total_bytes >> 20));
    }
    if (!scan.files.emplace(path, size).second || scan.symlinks.contains(path)) {
      return fail(invalid(name, fmt::format("it holds {} twice", path)));
    }
    const std::string digest = blobDigest(path);
    const bool hash = options.verify_blobs && !digest.empty();
    const bool named = path == "index.json" || path == "manifest.json";
    bool keep =
        size <= options.max_document_bytes && documents_bytes + size <= options.max_documents_bytes;
    std::string doc;
    Sha256 hasher;
    bool first = true;
    while (true) {
      const la_ssize_t n = archive_read_data(a.get(), buf.data(), buf.size());
      if (n < 0) return fail(damaged(path));
      if (n == 0) break;
      const std::string_view piece(buf.data(), static_cast<size_t>(n));
      if (first) {
        first = false;
        keep = keep && (named || looksLikeJson(piece));
      }
      if (keep) doc.append(piece);
      if (hash) hasher.update(piece);
      if (!keep && !hash) {
        if (archive_read_data_skip(a.get()) < ARCHIVE_WARN) return fail(damaged(path));
        break;
      }
    }
    if (keep && !first) {
      documents_bytes += doc.size();
      scan.documents.emplace(path, std::move(doc));
    }
    if (hash && hasher.finish() != digest) scan.mismatched.push_back(path);
  }
  for (const auto& [link, _] : scan.symlinks) {
    if (scan.files.contains(link))
      return fail(invalid(name, fmt::format("it holds {} twice", link)));
  }
  return scan;
}

std::string_view transportName(ArchiveFormat format) {
  return format == ArchiveFormat::kDockerArchive ? "docker-archive" : "oci-archive";
}

std::string ArchivedImage::describe() const {
  std::string what = names.empty() ? "untagged" : fmt::format("{}", fmt::join(names, " "));
  if (isValidDigest(digest)) what += fmt::format(" ({})", digest.substr(0, 19));
  return fmt::format("@{} {}", index, what);
}

Result<ArchiveListing> listArchiveImages(const ArchiveScan& scan, const std::string& name) {
  if (!scan.unsafe.empty()) {
    return fail(invalid(name, fmt::format("its entry {} is named outside the archive (an absolute "
                                          "name or ..)",
                                          scan.unsafe.front())));
  }
  if (!scan.others.empty()) {
    return fail(invalid(name, fmt::format("it holds {}; an image archive holds files and "
                                          "directories",
                                          scan.others.front())));
  }
  if (!scan.mismatched.empty()) {
    return fail(invalid(name, fmt::format("its blob {} does not hold what its digest says (a "
                                          "damaged or altered archive)",
                                          scan.mismatched.front())));
  }
  ArchiveListing out;
  if (scan.files.contains("manifest.json")) {
    out.format = ArchiveFormat::kDockerArchive;
    HUTCH_TRY(std::vector<DockerEntry> entries, dockerEntries(scan, name));
    for (size_t i = 0; i < entries.size(); ++i) {
      ArchivedImage image{.index = i, .names = entries[i].repo_tags, .digest = ""};
      auto config = resolveEntry(scan, entries[i].config, "a config", name);
      if (config) {
        auto doc = scan.documents.find(*config);
        if (doc != scan.documents.end()) image.digest = sha256Digest(doc->second);
      }
      out.images.push_back(std::move(image));
    }
    return out;
  }
  if (!scan.files.contains("index.json")) {
    if (scan.files.contains("repositories")) {
      return fail(invalid(name,
                          "it is a `docker save` archive of a Docker before 1.10 (no "
                          "manifest.json); save it again with a newer one"));
    }
    return fail(Errc::kInvalidArgument,
                fmt::format("{} is neither a `docker save` archive (no manifest.json) nor an OCI "
                            "image layout (no index.json): give one of those as a tar",
                            name));
  }
  out.format = ArchiveFormat::kOciArchive;
  // skopeo unpacks an OCI archive before reading it: nothing in it may be a link.
  if (!scan.symlinks.empty()) {
    return fail(invalid(name, fmt::format("it holds the symlink {}; an OCI image layout holds "
                                          "files and directories only",
                                          scan.symlinks.begin()->first)));
  }
  HUTCH_TRY(Index index, ociIndex(scan, name));
  for (size_t i = 0; i < index.manifests.size(); ++i) {
    const Descriptor& d = index.manifests[i];
    ArchivedImage image{.index = i, .names = {}, .digest = d.digest};
    if (auto it = d.annotations.find(kRefName); it != d.annotations.end()) {
      image.names.push_back(it->second);
    }
    out.images.push_back(std::move(image));
  }
  return out;
}

Result<ArchivedImage> chooseArchiveImage(const ArchiveListing& l, std::string_view want,
                                         const std::string& name) {
  if (want.empty()) {
    if (l.images.size() == 1) return l.images.front();
    return fail(Errc::kInvalidArgument,
                fmt::format("{} holds {} images: {}; name the one to use (--image NAME, or @N for "
                            "the N-th)",
                            name, l.images.size(), listing(l)));
  }
  if (want.starts_with('@')) {
    size_t n = 0;
    const std::string digits(want.substr(1));
    if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
        digits.size() < 9) {
      n = std::stoul(digits);
      if (n < l.images.size()) return l.images[n];
    }
    return fail(Errc::kNotFound,
                fmt::format("{} has no image {}; it holds {}", name, want, listing(l)));
  }
  std::vector<const ArchivedImage*> found;
  for (const ArchivedImage& image : l.images) {
    for (const std::string& n : image.names) {
      if (sameName(want, n)) {
        found.push_back(&image);
        break;
      }
    }
  }
  if (found.size() == 1) return *found.front();
  if (found.empty()) {
    return fail(Errc::kNotFound,
                fmt::format("{} has no image named {}; it holds {}", name, want, listing(l)));
  }
  return fail(Errc::kInvalidArgument,
              fmt::format("{} holds {} images named {}: {}; name one by its position (@N)", name,
                          found.size(), want, listing(l)));
}

Result<> checkArchiveImage(const ArchiveScan& scan, const ArchiveListing& l,
                           const ArchivedImage& image, const std::string& name,
                           const Limits& limits) {
  const std::string what = fmt::format("image {} of {}", image.describe(), name);
  if (l.format == ArchiveFormat::kDockerArchive) {
    HUTCH_TRY(std::vector<DockerEntry> entries, dockerEntries(scan, name));
    HUTCH_CHECK(image.index < entries.size());
    const DockerEntry& entry = entries[image.index];
    if (entry.layers.size() > limits.max_layers) {
      return fail(Errc::kResourceExhausted,
                  fmt::format("{} has {} layers, more than the {} allowed", what,
                              entry.layers.size(), limits.max_layers));
    }
    HUTCH_TRY(std::string config_path, resolveEntry(scan, entry.config, "a config", name));
    HUTCH_TRY(std::string_view doc, document(scan, config_path, "a config", name));
    // Its name is its digest (<hex>.json, or blobs/sha256/<hex> in Docker 25's archives).
    std::string named = blobDigest(config_path);
    if (named.empty() && config_path.size() == 69 && config_path.ends_with(".json")) {
      named = "sha256:" + config_path.substr(0, 64);
      if (!isValidDigest(named)) named.clear();
    }
    if (!named.empty() && sha256Digest(doc) != named) {
      return fail(invalid(
          name, fmt::format("its config {} does not hold what its name says", config_path)));
    }
    HUTCH_TRY(ImageConfig config, checkedConfig(doc, what, limits));
    if (config.diff_ids.size() != entry.layers.size()) {
      return fail(invalid(name, fmt::format("{} lists {} layers but its config has {} diff_ids",
                                            what, entry.layers.size(), config.diff_ids.size())));
    }
    for (const std::string& layer : entry.layers) {
      HUTCH_TRY_VOID(resolveEntry(scan, layer, "a layer", name));
    }
    return ok();
  }
  HUTCH_TRY(Index index, ociIndex(scan, name));
  HUTCH_CHECK(image.index < index.manifests.size());
  Descriptor d = index.manifests[image.index];
  HUTCH_TRY(std::string_view doc, descriptorDocument(scan, d, "an image manifest", name));
  HUTCH_TRY(MediaDocument parsed, parseDocument(doc, d.media_type, limits));
  if (const auto* nested = std::get_if<Index>(&parsed)) {
    HUTCH_TRY(d, selectPlatform(*nested));
    HUTCH_TRY(doc, descriptorDocument(scan, d, "an image manifest", name));
    HUTCH_TRY(parsed, parseDocument(doc, d.media_type, limits));
  }
  const auto* manifest = std::get_if<Manifest>(&parsed);
  if (manifest == nullptr) {
    return fail(invalid(name, fmt::format("{} is an index inside an index", d.digest)));
  }
  HUTCH_TRY(std::string_view config_doc,
            descriptorDocument(scan, manifest->config, "an image config", name));
  HUTCH_TRY(ImageConfig config, checkedConfig(config_doc, what, limits));
  HUTCH_TRY_VOID(checkConfig(*manifest, config));
  for (const Descriptor& layer : manifest->layers) {
    HUTCH_TRY_VOID(descriptorBlob(scan, layer, "a layer", name));
  }
  return ok();
}

Result<std::string> archiveSource(const ArchiveListing& l, const ArchivedImage& image,
                                  const std::filesystem::path& file) {
  if (file.string().find(':') != std::string::npos) {
    return fail(Errc::kInternal, "An archive's path for skopeo may not hold ':': " + file.string());
  }
  if (l.format == ArchiveFormat::kDockerArchive) {
    return fmt::format("docker-archive:{}:@{}", file.string(), image.index);
  }
  if (l.images.size() == 1) return "oci-archive:" + file.string();
  if (image.names.empty()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The OCI archive holds {} images and {} has no name "
                            "({} annotation) to be picked by: export that image alone, or name it",
                            l.images.size(), image.describe(), kRefName));
  }
  size_t same = 0;
  for (const ArchivedImage& other : l.images) {
    if (!other.names.empty() && other.names.front() == image.names.front()) ++same;
  }
  if (same > 1) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The OCI archive holds {} images named {}; export the one to use "
                            "alone",
                            same, image.names.front()));
  }
  return fmt::format("oci-archive:{}:{}", file.string(), image.names.front());
}

}  // namespace hutch::image

#include "image/layout.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace hutch::image {

namespace {

constexpr const char* kRefName = "org.opencontainers.image.ref.name";
constexpr int kMaxNestedIndexes = 2;

// Reads the regular file behind `fd` whole, refusing more than `max` bytes.
Result<std::string> readAll(int fd, size_t max, const std::string& what) {
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysError(fmt::format("Cannot read {}", what), errno));
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max) {
      return fail(Errc::kResourceExhausted,
                  fmt::format("{} is larger than the limit of {} bytes", what, max));
    }
  }
}

Result<int64_t> regularSize(int fd, const std::string& what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(sysError(fmt::format("Cannot stat {}", what), errno));
  if (!S_ISREG(st.st_mode)) {
    return fail(Errc::kInvalidArgument, fmt::format("{} is not a regular file", what));
  }
  return static_cast<int64_t>(st.st_size);
}

class LayoutReader {
 public:
  LayoutReader(std::filesystem::path blob_root, const Limits& limits)
      : blob_root_(std::move(blob_root)), limits_(limits) {}

  // A JSON blob, its size and digest checked against the descriptor.
  Result<std::string> readJsonBlob(const Descriptor& d) {
    std::string what = fmt::format("the blob {}", d.digest);
    if (static_cast<uint64_t>(d.size) > limits_.max_document_bytes) {
      return fail(Errc::kResourceExhausted,
                  fmt::format("The image's document {} is {} bytes, more than the limit of {}",
                              d.digest, d.size, limits_.max_document_bytes));
    }
    HUTCH_TRY(UniqueFd fd, openBlob(blob_root_, d.digest));
    HUTCH_TRY(int64_t size, regularSize(fd.get(), what));
    if (size != d.size) return fail(sizeMismatch(d, size));
    HUTCH_TRY(std::string data, readAll(fd.get(), limits_.max_document_bytes, what));
    if (static_cast<int64_t>(data.size()) != d.size) {
      return fail(sizeMismatch(d, static_cast<int64_t>(data.size())));
    }
    HUTCH_TRY_VOID(verifyDigest(d.digest, data));
    return data;
  }

  Result<LayerBlob> locateLayer(const Descriptor& d) {
    HUTCH_TRY(UniqueFd fd, openBlob(blob_root_, d.digest));
    HUTCH_TRY(int64_t size, regularSize(fd.get(), fmt::format("the layer {}", d.digest)));
    if (size != d.size) return fail(sizeMismatch(d, size));
    return LayerBlob{d, blob_root_ / "sha256" / std::string(digestHex(d.digest))};
  }

 private:
  static Error sizeMismatch(const Descriptor& d, int64_t actual) {
    return Error(Errc::kInvalidArgument,
                 fmt::format("The blob {} is {} bytes but its descriptor says {}: the pull was "
                             "incomplete or the blob was substituted; pull the image again",
                             d.digest, actual, d.size));
  }

  std::filesystem::path blob_root_;
  const Limits& limits_;
};

}  // namespace

Result<UniqueFd> openBlob(const std::filesystem::path& blob_root, std::string_view digest) {
  if (!isValidDigest(digest)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("'{}' is not a sha256 digest", digest.substr(0, 100)));
  }
  UniqueFd root(::open(blob_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    return fail(
        sysError(fmt::format("Cannot open the blob directory {}", blob_root.string()), errno));
  }
  std::string rel = fmt::format("sha256/{}", digestHex(digest));
  open_how how{};
  how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = -1;
  do {
    fd = ::syscall(SYS_openat2, root.get(), rel.c_str(), &how, sizeof how);
  } while (fd < 0 && (errno == EAGAIN || errno == EINTR));
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP || err == EXDEV) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("The blob {} in {} is reached through a symlink; remove it and "
                              "pull the image again",
                              digest, blob_root.string()));
    }
    return fail(
        sysError(fmt::format("Cannot open the blob {} in {}", digest, blob_root.string()), err));
  }
  UniqueFd out(static_cast<int>(fd));
  HUTCH_TRY(int64_t size, regularSize(out.get(), fmt::format("the blob {}", digest)));
  (void)size;
  // Reads block again from here on (O_NONBLOCK only kept a FIFO from blocking the open).
  int flags = ::fcntl(out.get(), F_GETFL);
  if (flags >= 0) ::fcntl(out.get(), F_SETFL, flags & ~O_NONBLOCK);
  return out;
}

namespace {

Result<std::string> readIndexJson(const std::filesystem::path& layout_dir, const Limits& limits) {
  std::filesystem::path index_path = layout_dir / "index.json";
  UniqueFd index_fd(::open(index_path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!index_fd) {
    return fail(sysError(fmt::format("Cannot open {}: is {} an OCI image layout?",
                                     index_path.string(), layout_dir.string()),
                         errno));
  }
  HUTCH_TRY_VOID(regularSize(index_fd.get(), index_path.string()));
  return readAll(index_fd.get(), limits.max_document_bytes, index_path.string());
}

}  // namespace

Result<std::set<std::string>> layoutBlobs(const std::filesystem::path& layout_dir,
                                          const std::filesystem::path& blob_dir,
                                          const Limits& limits) {
  HUTCH_TRY(std::string index_text, readIndexJson(layout_dir, limits));
  HUTCH_TRY(MediaDocument top, parseDocument(index_text, media::kOciIndex, limits));
  const auto* index = std::get_if<Index>(&top);
  if (index == nullptr) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} is not an image index", (layout_dir / "index.json").string()));
  }
  LayoutReader reader(blob_dir, limits);
  std::set<std::string> out;
  std::vector<std::pair<Descriptor, int>> pending;
  for (const Descriptor& d : index->manifests) pending.emplace_back(d, 0);
  while (!pending.empty()) {
    auto [d, depth] = std::move(pending.back());
    pending.pop_back();
    if (!out.insert(d.digest).second) continue;
    Result<std::string> text = reader.readJsonBlob(d);
    if (!text) {
      if (text.error().code() == Errc::kNotFound) continue;  // named, absent: nothing to follow
      return fail(text.error());
    }
    HUTCH_TRY(MediaDocument doc, parseDocument(*text, d.media_type, limits));
    if (const auto* manifest = std::get_if<Manifest>(&doc)) {
      out.insert(manifest->config.digest);
      for (const Descriptor& layer : manifest->layers) out.insert(layer.digest);
    } else if (depth >= kMaxNestedIndexes) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("The layout {} nests indexes more than {} deep", layout_dir.string(),
                              kMaxNestedIndexes));
    } else {
      for (const Descriptor& m : std::get<Index>(doc).manifests) pending.emplace_back(m, depth + 1);
    }
  }
  return out;
}

Result<ResolvedImage> resolveLayout(const std::filesystem::path& layout_dir,
                                    const std::filesystem::path& blob_dir,
                                    std::string_view ref_name, const Limits& limits,
                                    const Platform& want) {
  ResolvedImage out;
  out.blob_root = blob_dir.empty() ? layout_dir / "blobs" : blob_dir;
  LayoutReader reader(out.blob_root, limits);

  const std::filesystem::path index_path = layout_dir / "index.json";
  HUTCH_TRY(std::string index_text, readIndexJson(layout_dir, limits));
  HUTCH_TRY(MediaDocument top, parseDocument(index_text, media::kOciIndex, limits));
  auto* index = std::get_if<Index>(&top);
  if (index == nullptr) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} is not an image index", index_path.string()));
  }

  // The entries of `ref_name`: one image, or one per platform.
  Index named;
  std::vector<std::string> names;
  for (const Descriptor& d : index->manifests) {
    auto it = d.annotations.find(kRefName);
    std::string name = it == d.annotations.end() ? "" : it->second;
    if (name == ref_name || (ref_name.empty() && index->manifests.size() == 1)) {
      named.manifests.push_back(d);
    } else if (!name.empty()) {
      names.push_back(name);
    }
  }
  if (named.manifests.empty()) {
    return fail(Errc::kNotFound,
                fmt::format("The image layout {} has no image named '{}' (it has: {}); pull it "
                            "again",
                            layout_dir.string(), ref_name,
                            names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  }
  Descriptor current;
  if (named.manifests.size() == 1) {
    current = named.manifests.front();
  } else {
    HUTCH_TRY(current, selectPlatform(named, want));
  }

  for (int depth = 0;; ++depth) {
    HUTCH_TRY(std::string text, reader.readJsonBlob(current));
    HUTCH_TRY(MediaDocument doc, parseDocument(text, current.media_type, limits));
    if (auto* manifest = std::get_if<Manifest>(&doc)) {
      out.manifest_digest = current.digest;
      out.manifest = std::move(*manifest);
      break;
    }
    if (depth >= kMaxNestedIndexes) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("The image nests indexes more than {} deep", kMaxNestedIndexes));
    }
    HUTCH_TRY(current, selectPlatform(std::get<Index>(doc), want));
  }

  out.config_digest = out.manifest.config.digest;
  HUTCH_TRY(std::string config_text, reader.readJsonBlob(out.manifest.config));
  HUTCH_TRY(out.config, parseConfig(config_text, limits));
  HUTCH_TRY_VOID(checkConfig(out.manifest, out.config, want));
  for (const Descriptor& layer : out.manifest.layers) {
    HUTCH_TRY(LayerBlob blob, reader.locateLayer(layer));
    out.layers.push_back(std::move(blob));
  }
  return out;
}

}  // namespace hutch::image

#include "image/layer_apply.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/path_text.h"

namespace hutch::image {

namespace {

constexpr size_t kChunk = 128 * 1024;
constexpr std::string_view kWhiteout = ".wh.";
constexpr std::string_view kOpaque = ".wh..wh..opq";
constexpr std::string_view kWhiteoutMeta = ".wh..wh.";

struct ReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
using Archive = std::unique_ptr<archive, ReadFree>;

std::string archiveMessage(archive* a) {
  const char* text = archive_error_string(a);
  return text != nullptr ? text : "unknown libarchive error";
}

// The entry name cleaned; nullopt when it climbs above the root.
std::optional<std::string> cleanName(std::string_view name) {
  bool climbed = false;
  auto parts = base::lexicalParts(name, &climbed);
  if (climbed) return std::nullopt;
  return base::joinParts(parts, "");
}

// Both readers' state: the blob (compressed, hashed for the digest) feeds libarchive's
// decompressor in `outer` (format "raw"), whose output (hashed for the diff_id) feeds the tar
// reader.
struct Stream {
  int fd = -1;
  std::optional<uint64_t> expected_size;  // when the digest is verified
  uint64_t offset = 0;
  Sha256 compressed;
  Sha256 uncompressed;
  uint64_t uncompressed_bytes = 0;
  uint64_t budget = 0;  // uncompressed bytes allowed
  std::vector<char> in = std::vector<char>(kChunk);
  std::vector<char> mid = std::vector<char>(kChunk);
  archive* outer = nullptr;
  std::optional<Error> error;  // the first failure inside a callback
  std::string digest;
};

// Reads the next compressed chunk: 0 at the end, -1 on failure (error set).
ssize_t readBlob(Stream& s) {
  ssize_t n = 0;
  do {
    n = ::pread(s.fd, s.in.data(), s.in.size(), static_cast<off_t>(s.offset));
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    s.error = sysError(fmt::format("Cannot read layer {}", s.digest), errno);
    return -1;
  }
  s.compressed.update(s.in.data(), static_cast<size_t>(n));
  s.offset += static_cast<uint64_t>(n);
  if (s.expected_size && s.offset > *s.expected_size) {
    s.error = Error(Errc::kInvalidArgument,
                    fmt::format("Layer {} is larger than the {} bytes its manifest says; pull "
                                "the image again",
                                s.digest, *s.expected_size));
    return -1;
  }
  return n;
}

la_ssize_t readCompressed(archive* a, void* client, const void** buffer) {
  auto* s = static_cast<Stream*>(client);
  ssize_t n = readBlob(*s);
  if (n < 0) {
    archive_set_error(a, EIO, "%s", s->error->message().c_str());
    return -1;
  }
  *buffer = s->in.data();
  return n;
}

// Reads the next uncompressed chunk from the outer reader: 0 at the end, -1 on failure.
la_ssize_t readUncompressed(Stream& s) {
  la_ssize_t n = archive_read_data(s.outer, s.mid.data(), s.mid.size());
  if (n < 0) {
    if (!s.error) {
      s.error = Error(Errc::kInvalidArgument,
                      fmt::format("Layer {} cannot be decompressed: {}; pull the image again",
                                  s.digest, archiveMessage(s.outer)));
    }
    return -1;
  }
  s.uncompressed.update(s.mid.data(), static_cast<size_t>(n));
  s.uncompressed_bytes += static_cast<uint64_t>(n);
  if (s.uncompressed_bytes > s.budget) {
    s.error = Error(Errc::kResourceExhausted,
                    fmt::format("Layer {} unpacks past the limit of the image's total "
                                "uncompressed size",
                                s.digest));
    return -1;
  }
  return n;
}

la_ssize_t readTar(archive* a, void* client, const void** buffer) {
  auto* s = static_cast<Stream*>(client);
  la_ssize_t n = readUncompressed(*s);
  if (n < 0) {
    archive_set_error(a, EIO, "%s", s->error->message().c_str());
    return -1;
  }
  *buffer = s->mid.data();
  return n;
}

struct Meta {
  uid_t uid = 0;
  gid_t gid = 0;
  mode_t perm = 0;
  struct timespec atime {};
  struct timespec mtime {};
  std::vector<std::pair<std::string, std::string>> xattrs;
};

class Applier {
 public:
  Applier(RootDir& root, const Descriptor& layer, const ApplyLimits& limits, ApplyUsage& usage)
      : root_(root), layer_(layer), limits_(limits), usage_(usage) {}

  Result<LayerStats> run(int fd);

 private:
  std::string shownDigest() const { return layer_.digest.empty() ? "(unnamed)" : layer_.digest; }
  Error layerError(Errc code, std::string_view what) const {
    return Error(code, fmt::format("Layer {} {}", shownDigest(), what));
  }
  Error entryError(const Error& cause, const std::string& path) const {
    return Error(
        cause.code(),
        fmt::format("Cannot apply layer {} at /{}: {}", shownDigest(), path, cause.message()),
        cause.sysErrno());
  }
  // The stream's own failure (limits, digest, I/O) when there is one, else libarchive's.
  Error tarError(archive* tar, const std::string& where) const {
    if (stream_.error) return *stream_.error;
    return layerError(
        Errc::kInvalidArgument,
        fmt::format("is not a valid tar{}: {}; pull the image again", where, archiveMessage(tar)));
  }

  Result<> applyEntry(archive* tar, archive_entry* e);
  Result<> whiteout(const std::string& dir, std::string_view base, const std::string& path);
  Result<Meta> readMeta(archive_entry* e, const std::string& path) const;
  Result<> ensureParent(const std::string& dir);
  Result<> writeFile(archive* tar, archive_entry* e, const std::string& path, const Meta& meta);
  Result<> setMeta(const std::string& path, const Meta& meta, bool is_link);
  Result<> drain();

  RootDir& root_;
  const Descriptor& layer_;
  const ApplyLimits& limits_;
  ApplyUsage& usage_;
  Stream stream_;
  LayerStats stats_;
  std::unordered_set<std::string> unpacked_;  // entries of this layer, by clean path
  std::string last_parent_;                   // known to exist (reset when anything is removed)
  bool last_parent_ok_ = false;
  std::vector<std::pair<std::string, Meta>> dirs_;  // times set at the end
};

Result<LayerStats> Applier::run(int fd) {
  stream_.fd = fd;
  stream_.digest = shownDigest();
  if (limits_.verify_digest) {
    if (!isValidDigest(layer_.digest) || layer_.size < 0) {
      return fail(layerError(Errc::kInvalidArgument, "has no valid sha256 digest and size"));
    }
    stream_.expected_size = static_cast<uint64_t>(layer_.size);
  }
  if (usage_.bytes > limits_.max_total_bytes) {
    return fail(layerError(Errc::kResourceExhausted,
                           "cannot be applied: the image's total "
                           "uncompressed size limit is reached"));
  }
  stream_.budget = limits_.max_total_bytes - usage_.bytes;

  Archive outer(archive_read_new());
  int expected_filter = ARCHIVE_FILTER_NONE;
  if (layer_.compression == Compression::kGzip) {
    archive_read_support_filter_gzip(outer.get());
    expected_filter = ARCHIVE_FILTER_GZIP;
  } else if (layer_.compression == Compression::kZstd) {
    archive_read_support_filter_zstd(outer.get());
    expected_filter = ARCHIVE_FILTER_ZSTD;
  }
  archive_read_support_format_raw(outer.get());
  stream_.outer = outer.get();
  archive_entry* entry = nullptr;
  if (archive_read_open(outer.get(), &stream_, nullptr, readCompressed, nullptr) != ARCHIVE_OK ||
      archive_read_next_header(outer.get(), &entry) < ARCHIVE_WARN) {
    if (stream_.error) return fail(*stream_.error);
    return fail(layerError(Errc::kInvalidArgument,
                           fmt::format("cannot be read: {}", archiveMessage(outer.get()))));
  }
  if (archive_filter_code(outer.get(), 0) != expected_filter) {
    static constexpr const char* kNames[] = {"uncompressed", "gzip-compressed", "zstd-compressed"};
    return fail(
        layerError(Errc::kInvalidArgument,
                   fmt::format("is not {} as its media type {} says; the image is broken",
                               kNames[static_cast<int>(layer_.compression)], layer_.media_type)));
  }

  Archive tar(archive_read_new());
  archive_read_support_format_tar(tar.get());
  if (archive_read_open(tar.get(), &stream_, nullptr, readTar, nullptr) != ARCHIVE_OK) {
    return fail(tarError(tar.get(), ""));
  }
  while (true) {
    int rc = archive_read_next_header(tar.get(), &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) return fail(tarError(tar.get(), ""));
    HUTCH_TRY_VOID(applyEntry(tar.get(), entry));
  }
  HUTCH_TRY_VOID(drain());
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    auto done = root_.utimens(it->first, it->second.atime, it->second.mtime);
    if (!done && done.error().code() != Errc::kNotFound) {
      return fail(entryError(done.error(), it->first));
    }
  }
  stats_.compressed_bytes = stream_.offset;
  stats_.uncompressed_bytes = stream_.uncompressed_bytes;
  stats_.diff_id = stream_.uncompressed.finish();
  usage_.bytes += stream_.uncompressed_bytes;
  if (limits_.verify_digest) {
    if (stream_.offset != static_cast<uint64_t>(layer_.size)) {
      return fail(layerError(Errc::kInvalidArgument,
                             fmt::format("is {} bytes but its manifest says {}; pull the image "
                                         "again",
                                         stream_.offset, layer_.size)));
    }
    std::string actual = stream_.compressed.finish();
    if (actual != layer_.digest) {
      return fail(layerError(Errc::kInvalidArgument,
                             fmt::format("does not match its digest (the blob hashes to {}): it "
                                         "is corrupted or was substituted; pull the image again",
                                         actual)));
    }
  }
  return stats_;
}

// The rest of the uncompressed stream (after the tar's end) and of the blob, hashed.
Result<> Applier::drain() {
  while (true) {
    la_ssize_t n = readUncompressed(stream_);
    if (n < 0) return fail(*stream_.error);
    if (n == 0) break;
  }
  while (true) {
    ssize_t n = readBlob(stream_);
    if (n < 0) return fail(*stream_.error);
    if (n == 0) return ok();
  }
}

Result<> Applier::applyEntry(archive* tar, archive_entry* e) {
  const char* raw = archive_entry_pathname(e);
  std::string_view name = raw != nullptr ? raw : "";
  if (++usage_.entries > limits_.max_entries) {
    return fail(layerError(
        Errc::kResourceExhausted,
        fmt::format("has more entries than the image limit of {}", limits_.max_entries)));
  }
  ++stats_.entries;
  if (name.empty()) return fail(layerError(Errc::kInvalidArgument, "has an entry without a name"));
  if (name.size() > limits_.max_path_length) {
    return fail(layerError(Errc::kResourceExhausted,
                           fmt::format("has an entry name of {} bytes, more than the limit of {}",
                                       name.size(), limits_.max_path_length)));
  }
  std::optional<std::string> clean = cleanName(name);
  if (!clean) {
    return fail(layerError(Errc::kInvalidArgument,
                           fmt::format("has an entry {} outside the image root; the image is "
                                       "malicious or broken",
                                       name.substr(0, 300))));
  }
  const std::string& path = *clean;
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
  std::string_view base = std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1);
  if (limits_.whiteouts && base.starts_with(kWhiteout)) return whiteout(dir, base, path);

  mode_t type = archive_entry_filetype(e);
  const char* link_target = archive_entry_hardlink(e);
  if (link_target == nullptr && type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK &&
      type != AE_IFIFO) {
    if (type == AE_IFCHR || type == AE_IFBLK) {
      return fail(layerError(Errc::kUnsupported,
                             fmt::format("has a device node at /{}; images with device nodes are "
                                         "not supported",
                                         path)));
    }
    return fail(layerError(Errc::kUnsupported,
                           fmt::format("has an entry of unsupported type (socket or unknown) at "
                                       "/{}",
                                       path)));
  }
  if (path.empty() && (type != AE_IFDIR || link_target != nullptr)) {
    return fail(layerError(Errc::kInvalidArgument,
                           "has a non-directory entry for the root; the image is broken"));
  }
  HUTCH_TRY(Meta meta, readMeta(e, path));
  unpacked_.insert(path);
  HUTCH_TRY_VOID(ensureParent(dir));
  auto existing = root_.lstat(path);
  if (!existing) return fail(entryError(existing.error(), path));
  bool is_dir = link_target == nullptr && type == AE_IFDIR;
  if (*existing && !path.empty() && S_ISDIR((*existing)->st_mode) != is_dir) {
    auto removed = root_.remove(path);
    if (!removed) return fail(entryError(removed.error(), path));
    last_parent_ok_ = false;
    existing->reset();
  }

  Result<> done;
  if (link_target != nullptr) {
    std::string_view target = link_target;
    if (target.size() > limits_.max_path_length) {
      return fail(layerError(Errc::kResourceExhausted,
                             fmt::format("has a hard link target of more than {} bytes at /{}",
                                         limits_.max_path_length, path)));
    }
    std::optional<std::string> clean_target = cleanName(target);
    if (!clean_target || clean_target->empty()) {
      return fail(layerError(Errc::kInvalidArgument,
                             fmt::format("has a hard link at /{} to {}, outside the image; the "
                                         "image is malicious or broken",
                                         path, target.substr(0, 300))));
    }
    done = root_.hardlink(*clean_target, path);
    if (!done && (done.error().code() == Errc::kNotFound ||
                  done.error().code() == Errc::kFailedPrecondition)) {
      return fail(layerError(Errc::kInvalidArgument,
                             fmt::format("has a hard link at /{} to /{}, which is not a file of "
                                         "the image",
                                         path, *clean_target)));
    }
  } else if (type == AE_IFDIR) {
    if (!*existing) done = root_.mkdir(path, 0700);
    if (done) done = setMeta(path, meta, false);
    if (done) dirs_.emplace_back(path, meta);
  } else if (type == AE_IFREG) {
    done = writeFile(tar, e, path, meta);
  } else if (type == AE_IFLNK) {
    const char* target = archive_entry_symlink(e);
    std::string_view t = target != nullptr ? target : "";
    if (t.empty() || t.size() > limits_.max_path_length) {
      return fail(layerError(
          t.empty() ? Errc::kInvalidArgument : Errc::kResourceExhausted,
          fmt::format("has a symlink at /{} with an empty target or one longer than {} bytes", path,
                      limits_.max_path_length)));
    }
    done = root_.symlink(t, path);
    if (done) done = setMeta(path, meta, true);
  } else {
    done = root_.mkfifo(path, 0600);
    if (done) done = setMeta(path, meta, false);
  }
  if (!done) return fail(entryError(done.error(), path));
  return ok();
}

Result<> Applier::whiteout(const std::string& dir, std::string_view base, const std::string& path) {
  if (base == kOpaque) {
    ++stats_.whiteouts;
    auto st = root_.lstat(dir);
    if (!st) return fail(entryError(st.error(), path));
    if (!*st || !S_ISDIR((*st)->st_mode)) return ok();
    auto done = root_.removeChildren(
        dir, [this](const std::string& child) { return unpacked_.contains(child); });
    if (!done) return fail(entryError(done.error(), path));
    last_parent_ok_ = false;
    return ok();
  }
  if (base.starts_with(kWhiteoutMeta)) return ok();  // aufs bookkeeping
  std::string_view hidden = base.substr(kWhiteout.size());
  if (hidden.empty() || hidden == "." || hidden == "..") {
    return fail(layerError(Errc::kInvalidArgument,
                           fmt::format("has a whiteout /{} that names no file", path)));
  }
  ++stats_.whiteouts;
  std::string target = dir.empty() ? std::string(hidden) : dir + "/" + std::string(hidden);
  if (unpacked_.contains(target)) return ok();  // whiteouts hide lower layers only
  auto done = root_.remove(target);
  if (!done) return fail(entryError(done.error(), path));
  last_parent_ok_ = false;
  return ok();
}

Result<Meta> Applier::readMeta(archive_entry* e, const std::string& path) const {
  Meta m;
  la_int64_t uid = archive_entry_uid(e);
  la_int64_t gid = archive_entry_gid(e);
  if (uid < 0 || gid < 0 || uid >= 0xffffffffLL || gid >= 0xffffffffLL) {
    return fail(layerError(Errc::kInvalidArgument,
                           fmt::format("has an owner {}:{} out of range at /{}", uid, gid, path)));
  }
  m.uid = static_cast<uid_t>(uid);
  m.gid = static_cast<gid_t>(gid);
  m.perm = archive_entry_perm(e) & 07777;
  auto ts = [](time_t sec, long nsec) {
    struct timespec t {};
    t.tv_sec = sec;
    t.tv_nsec = nsec >= 0 && nsec < 1'000'000'000 ? nsec : 0;
    return t;
  };
  if (archive_entry_mtime_is_set(e)) {
    m.mtime = ts(archive_entry_mtime(e), archive_entry_mtime_nsec(e));
  } else {
    m.mtime.tv_nsec = UTIME_OMIT;
  }
  m.atime = archive_entry_atime_is_set(e) ? ts(archive_entry_atime(e), archive_entry_atime_nsec(e))
                                          : m.mtime;
  archive_entry_xattr_reset(e);
  const char* name = nullptr;
  const void* value = nullptr;
  size_t size = 0;
  while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
    if (name == nullptr) continue;
    std::string_view n = name;
    if (n.starts_with("user.") || n == "security.capability") {
      m.xattrs.emplace_back(n, std::string(static_cast<const char*>(value), size));
    }
  }
  return m;
}

Result<> Applier::ensureParent(const std::string& dir) {
  if (dir.empty() || (last_parent_ok_ && dir == last_parent_)) return ok();
  auto made = root_.mkdirAll(dir, 0755);
  if (!made) return fail(entryError(made.error(), dir));
  last_parent_ = dir;
  last_parent_ok_ = true;
  return ok();
}

Result<> Applier::writeFile(archive* tar, archive_entry* e, const std::string& path,
                            const Meta& meta) {
  la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
  if (size < 0 || static_cast<uint64_t>(size) > limits_.max_file_bytes) {
    return fail(layerError(Errc::kResourceExhausted,
                           fmt::format("has a file /{} of {} bytes, more than the limit of {}",
                                       path, size, limits_.max_file_bytes)));
  }
  HUTCH_TRY(UniqueFd fd, root_.createFile(path));
  while (true) {
    const void* buf = nullptr;
    size_t len = 0;
    la_int64_t offset = 0;
    int rc = archive_read_data_block(tar, &buf, &len, &offset);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) return fail(tarError(tar, fmt::format(" at /{}", path)));
    if (offset < 0 || static_cast<uint64_t>(offset) + len > static_cast<uint64_t>(size)) {
      return fail(layerError(Errc::kInvalidArgument,
                             fmt::format("has more data than its size at /{}", path)));
    }
    const char* p = static_cast<const char*>(buf);
    while (len > 0) {
      ssize_t n = ::pwrite(fd.get(), p, len, static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail(sysError("Cannot write the file", errno));
      }
      p += n;
      len -= static_cast<size_t>(n);
      offset += n;
    }
  }
  // Sparse files: holes at the end are not data blocks.
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return fail(sysError("Cannot size the file", errno));
  }
  if (limits_.keep_owners && ::fchown(fd.get(), meta.uid, meta.gid) != 0) {
    return fail(sysError("Cannot set the owner", errno));
  }
  if (::fchmod(fd.get(), meta.perm) != 0) return fail(sysError("Cannot set the mode", errno));
  for (const auto& [name, value] : meta.xattrs) {
    if (::fsetxattr(fd.get(), name.c_str(), value.data(), value.size(), 0) != 0) {
      return fail(sysError(fmt::format("Cannot set the attribute {}", name), errno));
    }
  }
  const struct timespec times[2] = {meta.atime, meta.mtime};
  if (::futimens(fd.get(), times) != 0) return fail(sysError("Cannot set the times", errno));
  return ok();
}

Result<> Applier::setMeta(const std::string& path, const Meta& meta, bool is_link) {
  if (limits_.keep_owners) HUTCH_TRY_VOID(root_.chown(path, meta.uid, meta.gid));
  if (is_link) return root_.utimens(path, meta.atime, meta.mtime);
  HUTCH_TRY_VOID(root_.chmod(path, meta.perm));
  for (const auto& [name, value] : meta.xattrs) HUTCH_TRY_VOID(root_.setXattr(path, name, value));
  return root_.utimens(path, meta.atime, meta.mtime);
}

}  // namespace

Result<LayerStats> applyLayer(RootDir& root, int blob_fd, const Descriptor& layer,
                              const ApplyLimits& limits, ApplyUsage& usage) {
  return Applier(root, layer, limits, usage).run(blob_fd);
}

}  // namespace hutch::image

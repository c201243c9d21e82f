#include "cli/tar_stream.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/unique_fd.h"

namespace hutch::cli {

namespace {

constexpr size_t kChunk = 256 * 1024;

struct ArchiveWriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct ArchiveReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};
struct ResolverFree {
  void operator()(archive_entry_linkresolver* r) const { archive_entry_linkresolver_free(r); }
};
using WriteArchive = std::unique_ptr<archive, ArchiveWriteFree>;
using ReadArchive = std::unique_ptr<archive, ArchiveReadFree>;
using Entry = std::unique_ptr<archive_entry, EntryFree>;

std::string archiveMessage(archive* a) {
  const char* text = archive_error_string(a);
  return text != nullptr ? text : "unknown libarchive error";
}

Error archiveError(archive* a, std::string_view what) {
  return Error(Errc::kInternal, fmt::format("{}: {}", what, archiveMessage(a)));
}

std::string joinPath(const std::string& dir, const std::string& name) {
  if (name.empty()) return dir;
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

// ---- writing ----

struct Sink {
  int fd;
  const TarCallbacks* callbacks;
};

la_ssize_t writeCallback(archive* a, void* client, const void* data, size_t size) {
  auto* sink = static_cast<Sink*>(client);
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(sink->fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      archive_set_error(a, errno, "cannot send the archive");
      return -1;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (sink->callbacks->on_bytes) sink->callbacks->on_bytes(size);
  return static_cast<la_ssize_t>(size);
}

class TreeWriter {
 public:
  TreeWriter(const CopyPlan& plan, archive* a, const TarOwner& owner, const TarCallbacks& callbacks)
      : plan_(plan),
        archive_(a),
        owner_(owner),
        callbacks_(callbacks),
        resolver_(archive_entry_linkresolver_new()),
        buffer_(kChunk, '\0') {
    archive_entry_linkresolver_set_strategy(resolver_.get(), archive_format(a));
  }

  Result<> writeAll() {
    bool directory = plan_.source_name == ".";
    std::string root = directory ? plan_.source_dir : joinPath(plan_.source_dir, plan_.source_name);
    return walk(root, "", directory);
  }

 private:
  // `rel` is the path below the source root ("" for the root itself).
  Result<> walk(const std::string& path, const std::string& rel, bool follow) {
    struct stat st {};
    if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
      return fail(sysError(fmt::format("Cannot read {}", path), errno));
    }
    std::string source_entry = plan_.source_name == "." ? rel
                               : rel.empty()            ? plan_.source_name
                                                        : plan_.source_name + "/" + rel;
    HUTCH_TRY(std::optional<std::string> name, renameEntry(source_entry, plan_));
    if (name) HUTCH_TRY_VOID(writeEntry(path, *name, st));
    if (!S_ISDIR(st.st_mode)) return ok();
    HUTCH_TRY(std::vector<std::string> children, listDirectory(path));
    for (const auto& child : children) {
      HUTCH_TRY_VOID(walk(joinPath(path, child), rel.empty() ? child : rel + "/" + child, false));
    }
    return ok();
  }

  static Result<std::vector<std::string>> listDirectory(const std::string& path) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), ::closedir);
    if (!dir) return fail(sysError(fmt::format("Cannot list {}", path), errno));
    std::vector<std::string> names;
    errno = 0;
    while (dirent* d = ::readdir(dir.get())) {
      std::string_view name(d->d_name);
      if (name != "." && name != "..") names.emplace_back(name);
      errno = 0;
    }
    if (errno != 0) return fail(sysError(fmt::format("Cannot list {}", path), errno));
    std::sort(names.begin(), names.end());
    return names;
  }

  Result<> writeEntry(const std::string& path, const std::string& name, const struct stat& st) {
    if (S_ISSOCK(st.st_mode)) {
      warn(fmt::format("{}: skipped, a socket cannot be copied", path));
      return ok();
    }
    Entry entry(archive_entry_new());
    archive_entry_copy_pathname(entry.get(), name.c_str());
    archive_entry_copy_stat(entry.get(), &st);
    archive_entry_unset_atime(entry.get());
    archive_entry_unset_ctime(entry.get());
    archive_entry_unset_birthtime(entry.get());
    archive_entry_copy_uname(entry.get(), nullptr);
    archive_entry_copy_gname(entry.get(), nullptr);
    if (owner_.uid) archive_entry_set_uid(entry.get(), *owner_.uid);
    if (owner_.gid) archive_entry_set_gid(entry.get(), *owner_.gid);
    if (S_ISLNK(st.st_mode)) {
      HUTCH_TRY(std::string target, readLink(path, st));
      archive_entry_copy_symlink(entry.get(), target.c_str());
    }
    archive_entry* raw = entry.get();
    archive_entry* spare = nullptr;
    archive_entry_linkify(resolver_.get(), &raw, &spare);  // a later hard link names the first
    Entry spare_owner(spare);  // nullptr for tar formats; freed either way
    int rc = archive_write_header(archive_, raw);
    if (rc == ARCHIVE_WARN) warn(fmt::format("{}: {}", path, archiveMessage(archive_)));
    if (rc < ARCHIVE_WARN)
      return fail(archiveError(archive_, fmt::format("Cannot archive {}", path)));
    bool has_data = S_ISREG(st.st_mode) && archive_entry_hardlink(raw) == nullptr &&
                    archive_entry_size(raw) > 0;
    if (has_data) HUTCH_TRY_VOID(writeData(path, archive_entry_size(raw)));
    return ok();
  }

  static Result<std::string> readLink(const std::string& path, const struct stat& st) {
    std::string target(static_cast<size_t>(st.st_size > 0 ? st.st_size : PATH_MAX) + 1, '\0');
    ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n < 0) return fail(sysError(fmt::format("Cannot read the link {}", path), errno));
    target.resize(static_cast<size_t>(n));
    return target;
  }

  Result<> writeData(const std::string& path, int64_t size) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
    if (!fd) return fail(sysError(fmt::format("Cannot open {}", path), errno));
    auto left = static_cast<uint64_t>(size);
    while (left > 0) {
      ssize_t n = ::read(fd.get(), buffer_.data(), std::min<uint64_t>(buffer_.size(), left));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(sysError(fmt::format("Cannot read {}", path), errno));
      if (n == 0) {
        warn(fmt::format("{}: shrank while it was copied; the rest is zeros", path));
        return ok();  // libarchive pads the entry to its recorded size
      }
      if (archive_write_data(archive_, buffer_.data(), static_cast<size_t>(n)) < 0) {
        return fail(archiveError(archive_, fmt::format("Cannot archive {}", path)));
      }
      left -= static_cast<uint64_t>(n);
    }
    return ok();
  }

  void warn(const std::string& message) const {
    if (callbacks_.on_warning) callbacks_.on_warning(message);
  }

  const CopyPlan& plan_;
  archive* archive_;
  TarOwner owner_;
  const TarCallbacks& callbacks_;
  std::unique_ptr<archive_entry_linkresolver, ResolverFree> resolver_;
  std::string buffer_;
};

// ---- reading ----

struct Source {
  int fd;
  const TarCallbacks* callbacks;
  std::string buffer;
};

la_ssize_t readCallback(archive* a, void* client, const void** data) {
  auto* source = static_cast<Source*>(client);
  while (true) {
    ssize_t n = ::read(source->fd, source->buffer.data(), source->buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      archive_set_error(a, errno, "cannot receive the archive");
      return -1;
    }
    if (n > 0 && source->callbacks->on_bytes) source->callbacks->on_bytes(static_cast<size_t>(n));
    *data = source->buffer.data();
    return n;
  }
}

// Reads what is left after the end-of-archive blocks, so the writer never sees a closed pipe.
void drain(int fd, std::string& buffer) {
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
  }
}

Result<std::string> realDirectory(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  if (!real) return fail(sysError(fmt::format("Cannot resolve {}", path), errno));
  return std::string(real.get());
}

}  // namespace

Result<> writeTar(const CopyPlan& plan, int fd, const TarOwner& owner,
                  const TarCallbacks& callbacks) {
  WriteArchive a(archive_write_new());
  Sink sink{fd, &callbacks};
  // pax keeps sub-second mtimes and long names; names are written as raw bytes, never converted.
  // Large writes make large exec frames (each frame costs the guest a wakeup); the end is padded
  // only to tar's usual 10 KiB record.
  if (archive_write_set_format_pax(a.get()) != ARCHIVE_OK ||
      archive_write_set_options(a.get(), "hdrcharset=BINARY") != ARCHIVE_OK ||
      archive_write_set_bytes_per_block(a.get(), kChunk) != ARCHIVE_OK ||
      archive_write_set_bytes_in_last_block(a.get(), 10240) != ARCHIVE_OK ||
      archive_write_open(a.get(), &sink, nullptr, writeCallback, nullptr) != ARCHIVE_OK) {
    return fail(archiveError(a.get(), "Cannot start the archive"));
  }
  TreeWriter writer(plan, a.get(), owner, callbacks);
  HUTCH_TRY_VOID(writer.writeAll());
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    return fail(archiveError(a.get(), "Cannot finish the archive"));
  }
  return ok();
}

Result<> extractTar(const CopyPlan& plan, int fd, bool keep_owner, const TarCallbacks& callbacks) {
  Source source{fd, &callbacks, std::string(kChunk, '\0')};
  HUTCH_TRY(std::string root, realDirectory(plan.target_dir));
  ReadArchive in(archive_read_new());
  archive_read_support_format_tar(in.get());
  if (archive_read_open(in.get(), &source, nullptr, readCallback, nullptr) != ARCHIVE_OK) {
    return fail(archiveError(in.get(), "Cannot read the archive from the box"));
  }
  WriteArchive out(archive_write_disk_new());
  int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
              ARCHIVE_EXTRACT_SECURE_NODOTDOT;
  if (keep_owner) flags |= ARCHIVE_EXTRACT_OWNER;
  archive_write_disk_set_options(out.get(), flags);
  auto warn = [&](const std::string& message) {
    if (callbacks.on_warning) callbacks.on_warning(message);
  };

  while (true) {
    archive_entry* entry = nullptr;
    int rc = archive_read_next_header(in.get(), &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc == ARCHIVE_WARN) warn(archiveMessage(in.get()));
    if (rc < ARCHIVE_WARN) return fail(archiveError(in.get(), "Bad archive from the box"));
    const char* entry_name = archive_entry_pathname(entry);
    if (entry_name == nullptr)
      return fail(Errc::kProtocol, "An archive entry from the box has no name");
    HUTCH_TRY(std::optional<std::string> name, renameEntry(entry_name, plan));
    if (!name) {
      archive_read_data_skip(in.get());
      continue;
    }
    std::string path = joinPath(root, *name);
    archive_entry_copy_pathname(entry, path.c_str());
    if (const char* link = archive_entry_hardlink(entry)) {
      HUTCH_TRY(std::optional<std::string> target, renameEntry(link, plan));
      if (!target) return fail(Errc::kProtocol, fmt::format("Bad hard link to '{}'", link));
      archive_entry_copy_hardlink(entry, joinPath(root, *target).c_str());
    }
    rc = archive_write_header(out.get(), entry);
    if (rc == ARCHIVE_WARN) warn(fmt::format("{}: {}", path, archiveMessage(out.get())));
    if (rc < ARCHIVE_WARN) {
      return fail(archiveError(out.get(), fmt::format("Cannot create {}", path)));
    }
    if (archive_entry_size(entry) > 0) {
      const void* block = nullptr;
      size_t size = 0;
      la_int64_t offset = 0;
      while ((rc = archive_read_data_block(in.get(), &block, &size, &offset)) == ARCHIVE_OK) {
        if (archive_write_data_block(out.get(), block, size, offset) < ARCHIVE_OK) {
          return fail(archiveError(out.get(), fmt::format("Cannot write {}", path)));
        }
      }
      if (rc != ARCHIVE_EOF) {
        return fail(archiveError(in.get(), fmt::format("Bad archive data for {}", path)));
      }
    }
    rc = archive_write_finish_entry(out.get());
    if (rc == ARCHIVE_WARN) warn(fmt::format("{}: {}", path, archiveMessage(out.get())));
    if (rc < ARCHIVE_WARN) {
      return fail(archiveError(out.get(), fmt::format("Cannot finish {}", path)));
    }
  }
  // Directory modes and mtimes are set last, once their contents are in place.
  if (archive_write_close(out.get()) != ARCHIVE_OK) {
    return fail(archiveError(out.get(), "Cannot finish the copy"));
  }
  drain(fd, source.buffer);
  return ok();
}

}  // namespace hutch::cli

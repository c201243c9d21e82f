#include "image/test_tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>

#include "base/check.h"
#include "image/digest.h"

namespace hutch::image::testing {

TarEntry file(std::string name, std::string data, mode_t mode) {
  TarEntry e;
  e.name = std::move(name);
  e.data = std::move(data);
  e.mode = mode;
  return e;
}

TarEntry dir(std::string name, mode_t mode) {
  TarEntry e;
  e.name = std::move(name);
  e.kind = TarEntry::Kind::kDir;
  e.mode = mode;
  return e;
}

TarEntry symlink(std::string name, std::string target) {
  TarEntry e;
  e.name = std::move(name);
  e.kind = TarEntry::Kind::kSymlink;
  e.link = std::move(target);
  e.mode = 0777;
  return e;
}

TarEntry hardlink(std::string name, std::string target) {
  TarEntry e;
  e.name = std::move(name);
  e.kind = TarEntry::Kind::kHardlink;
  e.link = std::move(target);
  return e;
}

namespace {

la_ssize_t appendTo(archive*, void* client, const void* buffer, size_t length) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

}  // namespace

std::string makeTar(const std::vector<TarEntry>& entries, Compression compression) {
  std::string out;
  std::unique_ptr<archive, int (*)(archive*)> w(archive_write_new(), archive_write_free);
  HUTCH_CHECK(archive_write_set_format_pax(w.get()) == ARCHIVE_OK);
  // No padding to 10240-byte blocks: the tar inside a compressed layer and the plain one are the
  // same bytes, and no zeros trail a zstd frame (registries' layers have none).
  HUTCH_CHECK(archive_write_set_bytes_in_last_block(w.get(), 1) == ARCHIVE_OK);
  if (compression == Compression::kGzip) HUTCH_CHECK(archive_write_add_filter_gzip(w.get()) == 0);
  if (compression == Compression::kZstd) HUTCH_CHECK(archive_write_add_filter_zstd(w.get()) == 0);
  HUTCH_CHECK(archive_write_open(w.get(), &out, nullptr, appendTo, nullptr) == ARCHIVE_OK);
  for (const TarEntry& t : entries) {
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(),
                                                               archive_entry_free);
    archive_entry_set_pathname(e.get(), t.name.c_str());
    archive_entry_set_perm(e.get(), t.mode);
    archive_entry_set_uid(e.get(), t.uid);
    archive_entry_set_gid(e.get(), t.gid);
    archive_entry_set_mtime(e.get(), t.mtime, 0);
    for (const auto& [name, value] : t.xattrs) {
      archive_entry_xattr_add_entry(e.get(), name.c_str(), value.data(), value.size());
    }
    switch (t.kind) {
      case TarEntry::Kind::kFile:
        archive_entry_set_filetype(e.get(), AE_IFREG);
        archive_entry_set_size(e.get(), static_cast<la_int64_t>(t.data.size()));
        break;
      case TarEntry::Kind::kDir: archive_entry_set_filetype(e.get(), AE_IFDIR); break;
      case TarEntry::Kind::kSymlink:
        archive_entry_set_filetype(e.get(), AE_IFLNK);
        archive_entry_set_symlink(e.get(), t.link.c_str());
        break;
      case TarEntry::Kind::kHardlink:
        archive_entry_set_filetype(e.get(), AE_IFREG);
        archive_entry_set_hardlink(e.get(), t.link.c_str());
        break;
      case TarEntry::Kind::kFifo: archive_entry_set_filetype(e.get(), AE_IFIFO); break;
      case TarEntry::Kind::kCharDev:
        archive_entry_set_filetype(e.get(), AE_IFCHR);
        archive_entry_set_rdevmajor(e.get(), 1);
        archive_entry_set_rdevminor(e.get(), 3);
        break;
    }
    HUTCH_CHECK(archive_write_header(w.get(), e.get()) == ARCHIVE_OK);
    if (t.kind == TarEntry::Kind::kFile && !t.data.empty()) {
      HUTCH_CHECK(archive_write_data(w.get(), t.data.data(), t.data.size()) ==
                  static_cast<la_ssize_t>(t.data.size()));
    }
  }
  HUTCH_CHECK(archive_write_close(w.get()) == ARCHIVE_OK);
  return out;
}

Descriptor layerOf(const std::string& blob, Compression compression) {
  Descriptor d;
  d.media_type = compression == Compression::kGzip   ? media::kOciLayerGzip
                 : compression == Compression::kZstd ? media::kOciLayerZstd
                                                     : media::kOciLayer;
  d.digest = sha256Digest(blob);
  d.size = static_cast<int64_t>(blob.size());
  d.compression = compression;
  return d;
}

UniqueFd memfdOf(const std::string& bytes) {
  UniqueFd fd(::memfd_create("layer", MFD_CLOEXEC));
  HUTCH_CHECK(fd.valid());
  HUTCH_CHECK(::write(fd.get(), bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  return fd;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/hutch-image-XXXXXX";
  HUTCH_CHECK(::mkdtemp(tmpl) != nullptr);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string snapshot(const std::filesystem::path& dir) {
  std::string out;
  struct stat top {};
  HUTCH_CHECK(::lstat(dir.c_str(), &top) == 0);
  out += fmt::format(". mode={:o} nlink={} mtime={}.{}\n", top.st_mode, top.st_nlink,
                     top.st_mtim.tv_sec, top.st_mtim.tv_nsec);
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const auto& p = it->path();
    struct stat st {};
    HUTCH_CHECK(::lstat(p.c_str(), &st) == 0);
    out += fmt::format("{} mode={:o} uid={} gid={} size={} nlink={} mtime={}.{}", p.string(),
                       st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_nlink, st.st_mtim.tv_sec,
                       st.st_mtim.tv_nsec);
    if (S_ISLNK(st.st_mode)) {
      out += " -> " + std::filesystem::read_symlink(p).string();
    } else if (S_ISREG(st.st_mode)) {
      std::ifstream in(p, std::ios::binary);
      out += " data=" + std::string(std::istreambuf_iterator<char>(in), {});
    }
    out += "\n";
  }
  return out;
}

}  // namespace hutch::image::testing

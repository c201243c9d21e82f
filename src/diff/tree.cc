#include "diff/tree.h"

// libext2fs's header defines inline functions in C that C++ does not accept: use the library's
// out-of-line copies instead.
#define NO_INLINE_FUNCS
#include <ext2fs/ext2_fs.h>
#include <ext2fs/ext2fs.h>
#include <fmt/format.h>

// com_err's header has no extern "C" of its own (ext2fs.h includes it inside one).
extern "C" {
#include <et/com_err.h>
}

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

namespace hutch::diff {
namespace {

std::string errorText(errcode_t code) {
  static const bool tables = [] {
    initialize_ext2_error_table();
    return true;
  }();
  (void)tables;
  return error_message(code);
}

int64_t nanos(uint32_t seconds, uint32_t extra) {
  // The extra field: nanoseconds << 2, and 2 epoch bits that extend the seconds past 2038.
  int64_t s = static_cast<int32_t>(seconds) + (static_cast<int64_t>(extra & 3) << 32);
  return s * 1'000'000'000 + static_cast<int64_t>(extra >> 2);
}

Result<Kind> kindOf(uint16_t mode) {
  if (LINUX_S_ISREG(mode)) return Kind::kFile;
  if (LINUX_S_ISDIR(mode)) return Kind::kDir;
  if (LINUX_S_ISLNK(mode)) return Kind::kSymlink;
  if (LINUX_S_ISCHR(mode)) return Kind::kCharDevice;
  if (LINUX_S_ISBLK(mode)) return Kind::kBlockDevice;
  if (LINUX_S_ISFIFO(mode)) return Kind::kFifo;
  if (LINUX_S_ISSOCK(mode)) return Kind::kSocket;
  return fail(Errc::kInvalidArgument, fmt::format("inode mode {:o} is no file type", mode));
}

}  // namespace

struct Image::Fs {
  ext2_filsys fs = nullptr;
  ~Fs() {
    if (fs != nullptr) ext2fs_close_free(&fs);
  }
};

Image::Image(std::unique_ptr<Fs> fs) : fs_(std::move(fs)) {}
Image::Image(Image&&) noexcept = default;
Image& Image::operator=(Image&&) noexcept = default;
Image::~Image() = default;

Result<Image> Image::open(const std::filesystem::path& file) {
  auto holder = std::make_unique<Fs>();
  // Read-only (no EXT2_FLAG_RW); checksums are not trusted to mean anything either way.
  int flags = EXT2_FLAG_64BITS | EXT2_FLAG_SKIP_MMP | EXT2_FLAG_IGNORE_CSUM_ERRORS;
  errcode_t err = ext2fs_open2(file.c_str(), nullptr, flags, 0, 0, unix_io_manager, &holder->fs);
  if (err != 0) {
    holder->fs = nullptr;
    return fail(
        Errc::kInvalidArgument,
        fmt::format("The box's disk holds no ext4 filesystem hutch can read ({})", errorText(err)));
  }
  if ((holder->fs->super->s_feature_compat & EXT4_FEATURE_COMPAT_FAST_COMMIT) != 0) {
    return fail(Errc::kUnsupported,
                "The box's filesystem uses fast_commit, whose journal hutch diff cannot replay");
  }
  return Image(std::move(holder));
}

namespace {

struct Walk {
  ext2_filsys fs;
  const Limits& limits;
  Tree tree;
  std::set<ext2_ino_t> visited;  // directories: a hostile filesystem can link one twice
  std::string error;
};

Result<std::string> symlinkTarget(ext2_filsys fs, ext2_ino_t ino, ext2_inode_large& inode,
                                  size_t max) {
  uint64_t size = EXT2_I_SIZE(&inode);
  if (size > max) return fail(Errc::kInvalidArgument, "symlink target too long");
  auto* small = reinterpret_cast<ext2_inode*>(&inode);
  if (ext2fs_is_fast_symlink(small) != 0) {
    const char* bytes = reinterpret_cast<const char*>(inode.i_block);
    size_t n = std::min<size_t>(size, sizeof(inode.i_block));
    return std::string(bytes, strnlen(bytes, n));
  }
  ext2_file_t file = nullptr;
  if (errcode_t err = ext2fs_file_open(fs, ino, 0, &file); err != 0) {
    return fail(Errc::kInvalidArgument, "cannot read a symlink: " + errorText(err));
  }
  std::string target(size, '\0');
  unsigned int got = 0;
  errcode_t err = ext2fs_file_read(file, target.data(), static_cast<unsigned>(size), &got);
  ext2fs_file_close(file);
  if (err != 0) return fail(Errc::kInvalidArgument, "cannot read a symlink: " + errorText(err));
  target.resize(got);
  return target;
}

Result<> walkDir(Walk& w, ext2_ino_t dir, const std::string& prefix, int depth) {
  if (depth > w.limits.max_depth) {
    return fail(Errc::kInvalidArgument,
                fmt::format("directories nest deeper than {} at {}", w.limits.max_depth, prefix));
  }
  if (!w.visited.insert(dir).second) {
    w.tree.notes.push_back(prefix + ": a directory seen twice (a loop), not walked again");
    return ok();
  }
  std::vector<std::pair<std::string, ext2_ino_t>> children;
  struct Ctx {
    std::vector<std::pair<std::string, ext2_ino_t>>* children;
    std::vector<std::string>* notes;
    const std::string* prefix;
  } ctx{&children, &w.tree.notes, &prefix};
  auto each = [](ext2_ino_t, int, ext2_dir_entry* dirent, int, int, char*, void* priv) -> int {
    auto* c = static_cast<Ctx*>(priv);
    std::string name(dirent->name, static_cast<size_t>(ext2fs_dirent_name_len(dirent)));
    if (name == "." || name == ".." || name.empty()) return 0;
    if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos) {
      c->notes->push_back(*c->prefix + "/: an entry whose name holds '/' or NUL, skipped");
      return 0;
    }
    c->children->emplace_back(std::move(name), dirent->inode);
    return 0;
  };
  errcode_t err = ext2fs_dir_iterate2(w.fs, dir, 0, nullptr, each, &ctx);
  if (err == EXT2_ET_INLINE_DATA_CANT_ITERATE) {
    // A small directory kept in its inode (the inline_data feature): the flag says we know.
    children.clear();
    err = ext2fs_dir_iterate2(w.fs, dir, DIRENT_FLAG_INCLUDE_INLINE_DATA, nullptr, each, &ctx);
  }
  if (err != 0) {
    return fail(Errc::kInvalidArgument, fmt::format("cannot read directory {}: {}",
                                                    prefix.empty() ? "/" : prefix, errorText(err)));
  }
  for (auto& [name, ino] : children) {
    if (w.tree.entries.size() >= w.limits.max_entries) {
      return fail(Errc::kResourceExhausted,
                  fmt::format("the filesystem holds more than {} entries", w.limits.max_entries));
    }
    ext2_inode_large inode{};
    err = ext2fs_read_inode_full(w.fs, ino, reinterpret_cast<ext2_inode*>(&inode), sizeof(inode));
    std::string path = prefix + "/" + name;
    if (err != 0) {
      w.tree.notes.push_back(path + ": unreadable inode, skipped");
      continue;
    }
    auto kind = kindOf(inode.i_mode);
    if (!kind) {
      w.tree.notes.push_back(path + ": " + kind.error().message() + ", skipped");
      continue;
    }
    Entry e;
    e.path = path;
    e.kind = *kind;
    e.mode = inode.i_mode & 07777;
    e.uid = inode.i_uid | (static_cast<uint32_t>(inode.osd2.linux2.l_i_uid_high) << 16);
    e.gid = inode.i_gid | (static_cast<uint32_t>(inode.osd2.linux2.l_i_gid_high) << 16);
    e.size = EXT2_I_SIZE(&inode);
    bool extra = inode.i_extra_isize >= 8;  // i_ctime_extra and i_mtime_extra are there
    e.mtime_ns = nanos(inode.i_mtime, extra ? inode.i_mtime_extra : 0);
    e.ctime_ns = nanos(inode.i_ctime, extra ? inode.i_ctime_extra : 0);
    e.ino = ino;
    e.flags = inode.i_flags;
    std::copy(std::begin(inode.i_block), std::end(inode.i_block), e.blocks.begin());
    if (e.kind == Kind::kSymlink) {
      auto target = symlinkTarget(w.fs, ino, inode, w.limits.max_target);
      if (target) {
        e.target = std::move(*target);
      } else {
        w.tree.notes.push_back(path + ": " + target.error().message());
      }
    }
    if (e.kind == Kind::kDir) e.size = 0;  // block-sized, says nothing about the contents
    w.tree.entries.push_back(std::move(e));
    if (*kind == Kind::kDir) HUTCH_TRY_VOID(walkDir(w, ino, path, depth + 1));
  }
  return ok();
}

}  // namespace

Result<Tree> Image::walk(const Limits& limits) const {
  Walk w{fs_->fs, limits, {}, {}, {}};
  HUTCH_TRY_VOID(walkDir(w, EXT2_ROOT_INO, "", 0));
  std::sort(w.tree.entries.begin(), w.tree.entries.end(),
            [](const Entry& a, const Entry& b) { return a.path < b.path; });
  return std::move(w.tree);
}

Result<> Image::stream(uint32_t ino, const std::function<Result<>(std::string_view)>& sink) const {
  ext2_file_t file = nullptr;
  if (errcode_t err = ext2fs_file_open(fs_->fs, ino, 0, &file); err != 0) {
    return fail(Errc::kInvalidArgument, "cannot open a file: " + errorText(err));
  }
  std::string buf(64 << 10, '\0');
  Result<> result = ok();
  for (;;) {
    unsigned int got = 0;
    errcode_t err = ext2fs_file_read(file, buf.data(), static_cast<unsigned>(buf.size()), &got);
    if (err != 0) {
      result = fail(Errc::kInvalidArgument, "cannot read a file: " + errorText(err));
      break;
    }
    if (got == 0) break;
    result = sink(std::string_view(buf.data(), got));
    if (!result) break;
  }
  ext2fs_file_close(file);
  return result;
}

Result<std::string> Image::read(uint32_t ino, size_t max, uint64_t offset) const {
  ext2_file_t file = nullptr;
  if (errcode_t err = ext2fs_file_open(fs_->fs, ino, 0, &file); err != 0) {
    return fail(Errc::kInvalidArgument, "cannot open a file: " + errorText(err));
  }
  std::string out(max, '\0');
  size_t have = 0;
  errcode_t err = ext2fs_file_llseek(file, offset, EXT2_SEEK_SET, nullptr);
  while (err == 0 && have < max) {
    unsigned int got = 0;
    unsigned int want = static_cast<unsigned>(std::min<size_t>(max - have, 1 << 20));
    err = ext2fs_file_read(file, out.data() + have, want, &got);
    if (got == 0) break;
    have += got;
  }
  ext2fs_file_close(file);
  if (err != 0) return fail(Errc::kInvalidArgument, "cannot read a file: " + errorText(err));
  out.resize(have);
  return out;
}

}  // namespace hutch::diff

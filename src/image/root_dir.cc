#include "image/root_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "base/path_text.h"

namespace hutch::image {

namespace {

constexpr uint64_t kResolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

// openat2 (glibc 2.36 has no wrapper). EAGAIN: a concurrent rename raced a ".." lookup.
int openat2Fd(int dirfd, const char* path, uint64_t flags, uint64_t resolve) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = resolve;
  for (int attempt = 0; attempt < 64; ++attempt) {
    long fd = ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EAGAIN && errno != EINTR) return -1;
  }
  return -1;
}

std::string procPath(int fd) {
  return fmt::format("/proc/self/fd/{}", fd);
}

std::string shownPath(const std::string& clean) {
  return "/" + clean;
}

Error sysErr(std::string_view what, const std::string& shown, int err) {
  return sysError(fmt::format("Cannot {} {} in the image tree", what, shown), err);
}

Result<> writeAll(int fd, std::string_view data, const std::string& shown) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysErr("write", shown, errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return ok();
}

// The names in a directory (not "." or "..").
Result<std::vector<std::string>> listNames(int dirfd, const std::string& shown) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fail(sysErr("list", shown, errno));
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(fd);
    return fail(sysErr("list", shown, err));
  }
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(dir)) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  int err = errno;
  ::closedir(dir);
  if (err != 0) return fail(sysErr("list", shown, err));
  return names;
}

// Removes everything inside `dirfd` (an O_RDONLY directory fd), keeping what `keep` keeps.
Result<> removeIn(int dirfd, const std::string& clean,
                  const std::function<bool(const std::string&)>& keep) {
  HUTCH_TRY(std::vector<std::string> names, listNames(dirfd, shownPath(clean)));
  for (const std::string& name : names) {
    std::string child = clean.empty() ? name : clean + "/" + name;
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return fail(sysErr("stat", shownPath(child), errno));
    }
    bool kept = keep && keep(child);
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return fail(sysErr("open", shownPath(child), errno));
      HUTCH_TRY_VOID(removeIn(sub.get(), child, kept ? keep : nullptr));
      if (kept) continue;
      if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return fail(sysErr("remove", shownPath(child), errno));
      }
    } else if (!kept && ::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return fail(sysErr("remove", shownPath(child), errno));
    }
  }
  return ok();
}

}  // namespace

Result<RootDir> RootDir::open(const std::filesystem::path& host_dir) {
  UniqueFd fd(::open(host_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return fail(sysError(fmt::format("Cannot open the image tree {}", host_dir.string()), errno));
  }
  return RootDir(std::move(fd), host_dir);
}

std::string RootDir::cleanPath(std::string_view path) {
  return base::joinParts(base::lexicalParts(path), "");
}

Result<UniqueFd> RootDir::openDirPath(const std::string& clean) const {
  int fd =
      openat2Fd(fd_.get(), clean.empty() ? "." : clean.c_str(), O_PATH | O_DIRECTORY, kResolve);
  if (fd < 0) return fail(sysErr("open the directory", shownPath(clean), errno));
  return UniqueFd(fd);
}

Result<RootDir::Parent> RootDir::openParent(std::string_view path) const {
  if (path.find('\0') != std::string_view::npos) {
    return fail(Errc::kInvalidArgument, "A path in the image tree has a NUL byte");
  }
  std::string clean = cleanPath(path);
  Parent p;
  p.shown = shownPath(clean);
  size_t slash = clean.rfind('/');
  std::string dir = slash == std::string::npos ? "" : clean.substr(0, slash);
  p.leaf = slash == std::string::npos ? clean : clean.substr(slash + 1);
  if (clean.empty()) {
    p.fd = UniqueFd(::openat(fd_.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!p.fd) return fail(sysErr("open", p.shown, errno));
    return p;
  }
  HUTCH_TRY(p.fd, openDirPath(dir));
  return p;
}

Result<std::optional<struct stat>> RootDir::lstat(std::string_view path) const {
  auto p = openParent(path);
  if (!p) {
    int err = p.error().sysErrno();
    if (err == ENOENT || err == ENOTDIR) return std::optional<struct stat>();
    return fail(p.error());
  }
  struct stat st {};
  int rc = p->leaf.empty() ? ::fstat(p->fd.get(), &st)
                           : ::fstatat(p->fd.get(), p->leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW);
  if (rc != 0) {
    if (errno == ENOENT) return std::optional<struct stat>();
    return fail(sysErr("stat", p->shown, errno));
  }
  return std::optional<struct stat>(st);
}

Result<> RootDir::mkdir(std::string_view path, mode_t mode) {
  HUTCH_TRY(Parent p, openParent(path));
  if (p.leaf.empty()) return ok();
  if (::mkdirat(p.fd.get(), p.leaf.c_str(), mode) == 0) return ok();
  if (errno != EEXIST) return fail(sysErr("create the directory", p.shown, errno));
  struct stat st {};
  if (::fstatat(p.fd.get(), p.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
    return ok();
  }
  return fail(Errc::kFailedPrecondition,
              fmt::format("Cannot create the directory {} in the image tree: something else has "
                          "that name",
                          p.shown));
}

Result<> RootDir::mkdirAll(std::string_view path, mode_t mode) {
  std::string clean = cleanPath(path);
  if (clean.empty()) return ok();
  size_t end = 0;
  while (end != std::string::npos) {
    end = clean.find('/', end + 1);
    std::string prefix = clean.substr(0, end);
    int fd = openat2Fd(fd_.get(), prefix.c_str(), O_PATH | O_DIRECTORY, kResolve);
    if (fd >= 0) {
      ::close(fd);
      continue;
    }
    if (errno == ENOTDIR) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("Cannot create the directory {} in the image tree: {} is not a "
                              "directory",
                              shownPath(clean), shownPath(prefix)));
    }
    if (errno != ENOENT) return fail(sysErr("open the directory", shownPath(prefix), errno));
    HUTCH_TRY_VOID(mkdir(prefix, mode));
    fd = openat2Fd(fd_.get(), prefix.c_str(), O_PATH | O_DIRECTORY, kResolve);
    if (fd < 0) return fail(sysErr("open the directory", shownPath(prefix), errno));
    ::close(fd);
  }
  return ok();
}

Result<> RootDir::unlinkNonDir(const Parent& p) const {
  if (p.leaf.empty()) {
    return fail(Errc::kInvalidArgument, "The root of the image tree must stay a directory");
  }
  if (::unlinkat(p.fd.get(), p.leaf.c_str(), 0) == 0 || errno == ENOENT) return ok();
  if (errno == EISDIR) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Cannot replace {} in the image tree: it is a directory", p.shown));
  }
  return fail(sysErr("replace", p.shown, errno));
}

Result<UniqueFd> RootDir::createFile(std::string_view path) {
  HUTCH_TRY(Parent p, openParent(path));
  HUTCH_TRY_VOID(unlinkNonDir(p));
  UniqueFd fd(::openat(p.fd.get(), p.leaf.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return fail(sysErr("create", p.shown, errno));
  return fd;
}

Result<> RootDir::writeFile(std::string_view path, std::string_view contents, mode_t mode,
                            uid_t uid, gid_t gid) {
  HUTCH_TRY(UniqueFd fd, createFile(path));
  std::string shown = shownPath(cleanPath(path));
  HUTCH_TRY_VOID(writeAll(fd.get(), contents, shown));
  if (::fchown(fd.get(), uid, gid) != 0) return fail(sysErr("chown", shown, errno));
  if (::fchmod(fd.get(), mode) != 0) return fail(sysErr("chmod", shown, errno));
  return ok();
}

Result<> RootDir::writeFile(std::string_view path, int src_fd, mode_t mode, uid_t uid, gid_t gid) {
  HUTCH_TRY(UniqueFd fd, createFile(path));
  std::string shown = shownPath(cleanPath(path));
  std::vector<char> buf(128 * 1024);
  while (true) {
    ssize_t n = ::read(src_fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysError(fmt::format("Cannot read the source of {}", shown), errno));
    }
    if (n == 0) break;
    HUTCH_TRY_VOID(writeAll(fd.get(), std::string_view(buf.data(), static_cast<size_t>(n)), shown));
  }
  if (::fchown(fd.get(), uid, gid) != 0) return fail(sysErr("chown", shown, errno));
  if (::fchmod(fd.get(), mode) != 0) return fail(sysErr("chmod", shown, errno));
  return ok();
}

Result<> RootDir::symlink(std::string_view target, std::string_view path) {
  if (target.empty() || target.find('\0') != std::string_view::npos) {
    return fail(Errc::kInvalidArgument, "A symlink target is empty or has a NUL byte");
  }
  HUTCH_TRY(Parent p, openParent(path));
  HUTCH_TRY_VOID(unlinkNonDir(p));
  if (::symlinkat(std::string(target).c_str(), p.fd.get(), p.leaf.c_str()) != 0) {
    return fail(sysErr("create the symlink", p.shown, errno));
  }
  return ok();
}

Result<> RootDir::hardlink(std::string_view target, std::string_view path) {
  HUTCH_TRY(Parent t, openParent(target));
  HUTCH_TRY(Parent p, openParent(path));
  if (t.leaf.empty()) {
    return fail(Errc::kInvalidArgument, "A hard link cannot point at the root of the image");
  }
  struct stat st {};
  if (::fstatat(t.fd.get(), t.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return fail(sysError(
        fmt::format("Cannot link {} to {}: the target is not in the image tree", p.shown, t.shown),
        errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Cannot link {} to {}: the target is a directory", p.shown, t.shown));
  }
  if (t.shown == p.shown) return ok();  // a link to itself: nothing to do
  HUTCH_TRY_VOID(unlinkNonDir(p));
  if (::linkat(t.fd.get(), t.leaf.c_str(), p.fd.get(), p.leaf.c_str(), 0) != 0) {
    return fail(sysErr("create the hard link", p.shown, errno));
  }
  return ok();
}

Result<> RootDir::mkfifo(std::string_view path, mode_t mode) {
  HUTCH_TRY(Parent p, openParent(path));
  HUTCH_TRY_VOID(unlinkNonDir(p));
  if (::mkfifoat(p.fd.get(), p.leaf.c_str(), mode) != 0) {
    return fail(sysErr("create the FIFO", p.shown, errno));
  }
  return ok();
}

Result<> RootDir::remove(std::string_view path) {
  auto parent = openParent(path);
  if (!parent) {
    int err = parent.error().sysErrno();
    if (err == ENOENT || err == ENOTDIR) return ok();
    return fail(parent.error());
  }
  Parent& p = *parent;
  if (p.leaf.empty()) {
    return fail(Errc::kInvalidArgument, "The root of the image tree cannot be removed");
  }
  struct stat st {};
  if (::fstatat(p.fd.get(), p.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return ok();
    return fail(sysErr("stat", p.shown, errno));
  }
  if (S_ISDIR(st.st_mode)) {
    UniqueFd dir(
        ::openat(p.fd.get(), p.leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir) return fail(sysErr("open", p.shown, errno));
    HUTCH_TRY_VOID(removeIn(dir.get(), cleanPath(path), nullptr));
    if (::unlinkat(p.fd.get(), p.leaf.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      return fail(sysErr("remove", p.shown, errno));
    }
    return ok();
  }
  if (::unlinkat(p.fd.get(), p.leaf.c_str(), 0) != 0 && errno != ENOENT) {
    return fail(sysErr("remove", p.shown, errno));
  }
  return ok();
}

Result<> RootDir::removeChildren(std::string_view path,
                                 const std::function<bool(const std::string&)>& keep) {
  HUTCH_TRY(Parent p, openParent(path));
  UniqueFd dir(::openat(p.fd.get(), p.leaf.empty() ? "." : p.leaf.c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("Cannot empty {} in the image tree: it is not a directory", p.shown));
    }
    return fail(sysErr("open", p.shown, errno));
  }
  return removeIn(dir.get(), cleanPath(path), keep);
}

Result<> RootDir::chown(std::string_view path, uid_t uid, gid_t gid) {
  HUTCH_TRY(Parent p, openParent(path));
  int rc = p.leaf.empty() ? ::fchownat(p.fd.get(), "", uid, gid, AT_EMPTY_PATH)
                          : ::fchownat(p.fd.get(), p.leaf.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW);
  if (rc != 0) return fail(sysErr("chown", p.shown, errno));
  return ok();
}

Result<RootDir::Entry> RootDir::openEntry(const Parent& p) {
  Entry entry;
  entry.fd.reset(p.leaf.empty()
                     ? ::dup(p.fd.get())
                     : ::openat(p.fd.get(), p.leaf.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!entry.fd) return fail(sysErr("open", p.shown, errno));
  if (::fstat(entry.fd.get(), &entry.st) != 0) return fail(sysErr("stat", p.shown, errno));
  return entry;
}

Result<> RootDir::chmod(std::string_view path, mode_t mode) {
  HUTCH_TRY(Parent p, openParent(path));
  // An O_PATH fd of the entry itself, then chmod through /proc (fchmod refuses O_PATH fds, and
  // fchmodat cannot leave a symlink unfollowed before Linux 6.6).
  HUTCH_TRY(Entry entry, openEntry(p));
  if (S_ISLNK(entry.st.st_mode)) return ok();
  if (::chmod(procPath(entry.fd.get()).c_str(), mode) != 0) {
    return fail(sysErr("chmod", p.shown, errno));
  }
  return ok();
}

Result<> RootDir::setXattr(std::string_view path, const std::string& name, std::string_view value) {
  HUTCH_TRY(Parent p, openParent(path));
  HUTCH_TRY(Entry entry, openEntry(p));
  if (S_ISLNK(entry.st.st_mode)) {
    return fail(Errc::kUnsupported,
                fmt::format("Cannot set the attribute {} on the symlink {}", name, p.shown));
  }
  if (::setxattr(procPath(entry.fd.get()).c_str(), name.c_str(), value.data(), value.size(), 0) !=
      0) {
    return fail(sysErr(fmt::format("set the attribute {} of", name), p.shown, errno));
  }
  return ok();
}

Result<> RootDir::utimens(std::string_view path, const struct timespec& atime,
                          const struct timespec& mtime) {
  HUTCH_TRY(Parent p, openParent(path));
  const struct timespec times[2] = {atime, mtime};
  int rc = ::utimensat(p.fd.get(), p.leaf.empty() ? "." : p.leaf.c_str(), times,
                       p.leaf.empty() ? 0 : AT_SYMLINK_NOFOLLOW);
  if (rc != 0) return fail(sysErr("set the times of", p.shown, errno));
  return ok();
}

Result<> RootDir::copyTreeFrom(const std::filesystem::path& host_dir,
                               std::string_view path_in_root) {
  UniqueFd src(::open(host_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!src) return fail(sysError(fmt::format("Cannot open {}", host_dir.string()), errno));
  HUTCH_TRY_VOID(mkdirAll(path_in_root));
  return copyDir(src.get(), cleanPath(path_in_root));
}

Result<> RootDir::copyDir(int src_dir, const std::string& dst_clean) {
  HUTCH_TRY(std::vector<std::string> names, listNames(src_dir, "the source directory"));
  for (const std::string& name : names) {
    std::string child = dst_clean.empty() ? name : dst_clean + "/" + name;
    struct stat st {};
    if (::fstatat(src_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return fail(sysError(fmt::format("Cannot stat the source of {}", shownPath(child)), errno));
    }
    mode_t mode = st.st_mode & 07777;
    if (S_ISDIR(st.st_mode)) {
      HUTCH_TRY_VOID(mkdir(child, 0700));
      UniqueFd sub(
          ::openat(src_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return fail(sysError(fmt::format("Cannot open the source of {}", child), errno));
      HUTCH_TRY_VOID(copyDir(sub.get(), child));
      HUTCH_TRY_VOID(chmod(child, mode));
    } else if (S_ISREG(st.st_mode)) {
      UniqueFd in(::openat(src_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!in) return fail(sysError(fmt::format("Cannot open the source of {}", child), errno));
      HUTCH_TRY_VOID(writeFile(child, in.get(), mode, 0, 0));
    } else if (S_ISLNK(st.st_mode)) {
      std::string target(static_cast<size_t>(PATH_MAX), '\0');
      ssize_t n = ::readlinkat(src_dir, name.c_str(), target.data(), target.size());
      if (n < 0) return fail(sysError(fmt::format("Cannot read the symlink {}", child), errno));
      target.resize(static_cast<size_t>(n));
      HUTCH_TRY_VOID(symlink(target, child));
    } else {
      return fail(Errc::kUnsupported,
                  fmt::format("Cannot copy {} into the image tree: only directories, files and "
                              "symlinks are copied",
                              shownPath(child)));
    }
  }
  return ok();
}

}  // namespace hutch::image

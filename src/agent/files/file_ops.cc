#include "agent/files/file_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <queue>
#include <vector>

#include "agent/files/file_info.h"
#include "agent/files/paths.h"

namespace hutch::agent {
namespace {

// Symlinks followed for a write before giving up (the kernel's own limit).
constexpr int kMaxSymlinkHops = 40;
// How often long walks look at the stop flag.
constexpr size_t kStopCheckEvery = 256;

bool stopRequested(const FileContext& ctx) {
  return ctx.stop && ctx.stop->load(std::memory_order_relaxed);
}

Error cancelled() {
  return Error(Errc::kCancelled, "The agent is shutting down; the operation was stopped");
}

Result<std::string> readLinkAt(int dir, const char* name) {
  char buffer[4096];
  const ssize_t n = ::readlinkat(dir, name, buffer, sizeof buffer);
  if (n < 0) return fail(Error(Errc::kInternal, "Cannot read a symlink", errno));
  return std::string(buffer, static_cast<size_t>(n));
}

Result<proto::FileInfo> describeAt(const FileContext& ctx, int dir, const char* name,
                                   const std::string& path, const struct stat& st) {
  std::string target;
  if (S_ISLNK(st.st_mode)) {
    auto link = readLinkAt(dir, name);
    if (!link) return fail(fileError(link.error().sysErrno(), path, ctx.user));
    target = std::move(*link);
  }
  return describeFile(path, st, std::move(target), *ctx.users);
}

// The smallest `limit` names in directory fd, sorted, and whether there were more.
struct Names {
  std::vector<std::string> names;
  bool more = false;
};

Result<Names> readNames(int fd, size_t limit) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return fail(Error(Errc::kInternal, "Cannot duplicate a descriptor", errno));
  DIR* dir = ::fdopendir(copy);
  if (!dir) {
    const int err = errno;
    ::close(copy);
    return fail(Error(Errc::kInternal, "Cannot read a directory", err));
  }
  // A max-heap of what is kept: a huge directory costs `limit` names, not all of them.
  std::priority_queue<std::string> kept;
  Names result;
  while (true) {
    errno = 0;
    const dirent* entry = ::readdir(dir);
    if (!entry) break;
    const std::string_view name(entry->d_name);
    if (name == "." || name == "..") continue;
    if (kept.size() < limit) {
      kept.emplace(name);
    } else {
      result.more = true;
      if (!kept.empty() && name < kept.top()) {
        kept.pop();
        kept.emplace(name);
      }
    }
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) return fail(Error(Errc::kInternal, "Cannot read a directory", err));
  result.names.resize(kept.size());
  for (size_t i = kept.size(); i > 0; --i) {
    result.names[i - 1] = kept.top();
    kept.pop();
  }
  return result;
}

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string randomSuffix() {
  unsigned char bytes[8] = {};
  if (::getrandom(bytes, sizeof bytes, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bytes)) {
    // Only O_EXCL's uniqueness matters; the time and pid are enough for that.
    const uint64_t fallback =
        static_cast<uint64_t>(::getpid()) ^ static_cast<uint64_t>(::time(nullptr));
    for (size_t i = 0; i < sizeof bytes; ++i)
      bytes[i] = static_cast<unsigned char>(fallback >> (8 * i));
  }
  char hex[17];
  for (size_t i = 0; i < sizeof bytes; ++i) std::snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  return std::string(hex, 16);
}

// The target of a write: a symlink at path is followed (as a shell's redirection does), even
// when it dangles (the file it names is created).
Result<std::string> followSymlinks(const FileContext& ctx, const std::string& path) {
  std::string target = path;
  for (int hop = 0; hop < kMaxSymlinkHops; ++hop) {
    struct stat st {};
    if (::lstat(target.c_str(), &st) != 0) {
      if (errno == ENOENT) return target;
      return fail(fileError(errno, target, ctx.user));
    }
    if (!S_ISLNK(st.st_mode)) return target;
    auto link = readLinkAt(AT_FDCWD, target.c_str());
    if (!link) return fail(fileError(link.error().sysErrno(), target, ctx.user));
    target = resolvePath(*link, parentOf(target));
  }
  return fail(fileError(ELOOP, path, ctx.user));
}

struct ListFrame {
  UniqueFd fd;
  std::string path;
  Names names;
  size_t next = 0;
  uint32_t level = 1;
};

// One directory of a recursive removal: the stream of its entries.
struct RemoveFrame {
  DIR* dir = nullptr;
  std::string path;
  std::string name;  // in the parent

  int fd() const { return ::dirfd(dir); }
};

Result<DIR*> openDirNoFollow(int parent, const char* name, const std::string& path,
                             const FileContext& ctx) {
  const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fail(fileError(errno, path, ctx.user));
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    const int err = errno;
    ::close(fd);
    return fail(fileError(err, path, ctx.user));
  }
  return dir;
}

Result<> removeTree(const FileContext& ctx, const std::string& path, dev_t device) {
  std::vector<RemoveFrame> stack;
  auto closeAll = [&stack] {
    for (auto& frame : stack) ::closedir(frame.dir);
    stack.clear();
  };
  HUTCH_TRY(DIR * top, openDirNoFollow(AT_FDCWD, path.c_str(), path, ctx));
  stack.push_back(RemoveFrame{top, path, ""});
  size_t visited = 0;
  while (!stack.empty()) {
    if (++visited % kStopCheckEvery == 0 && stopRequested(ctx)) {
      closeAll();
      return fail(cancelled());
    }
    RemoveFrame& frame = stack.back();
    errno = 0;
    const dirent* entry = ::readdir(frame.dir);
    if (!entry) {
      if (errno != 0) {
        const Error error = fileError(errno, frame.path, ctx.user);
        closeAll();
        return fail(error);
      }
      // Empty now: remove it from its parent (the top one is removed by the caller).
      const std::string name = frame.name;
      const std::string dir_path = frame.path;
      ::closedir(frame.dir);
      stack.pop_back();
      if (stack.empty()) break;
      if (::unlinkat(stack.back().fd(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        const Error error = fileError(errno, dir_path, ctx.user);
        closeAll();
        return fail(error);
      }
      continue;
    }
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = childPath(frame.path, name);
    bool is_dir = entry->d_type == DT_DIR;
    if (entry->d_type == DT_UNKNOWN || is_dir) {
      struct stat st {};
      if (::fstatat(frame.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // removed meanwhile
        const Error error = fileError(errno, child, ctx.user);
        closeAll();
        return fail(error);
      }
      is_dir = S_ISDIR(st.st_mode);
      if (is_dir && st.st_dev != device) {
        closeAll();
        return fail(Errc::kFailedPrecondition,
                    "The directory " + child +
                        " is another filesystem mounted there; unmount it first (a recursive "
                        "remove does not cross filesystems)");
      }
    }
    if (is_dir) {
      auto sub = openDirNoFollow(frame.fd(), name.c_str(), child, ctx);
      if (!sub) {
        closeAll();
        return fail(sub.error());
      }
      stack.push_back(RemoveFrame{*sub, child, name});
      continue;
    }
    if (::unlinkat(frame.fd(), name.c_str(), 0) != 0 && errno != ENOENT) {
      const Error error = fileError(errno, child, ctx.user);
      closeAll();
      return fail(error);
    }
  }
  return ok();
}

}  // namespace

Result<proto::FileInfo> statPath(const FileContext& ctx, const std::string& path, bool follow) {
  struct stat st {};
  const int r = follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  if (r != 0) return fail(fileError(errno, path, ctx.user));
  return describeAt(ctx, AT_FDCWD, path.c_str(), path, st);
}

Result<proto::FileList> listDirectory(const FileContext& ctx, const std::string& path,
                                      uint32_t depth, uint32_t max_entries) {
  // The directory named is followed if it is a symlink (it was asked for); nothing below it is.
  UniqueFd root(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    if (errno == ENOTDIR) {
      return fail(Errc::kInvalidArgument, "The path " + path + " is not a directory");
    }
    return fail(fileError(errno, path, ctx.user));
  }
  proto::FileList list;
  auto names = readNames(root.get(), size_t{max_entries} + 1);
  if (!names) return fail(fileError(names.error().sysErrno(), path, ctx.user));
  std::vector<ListFrame> stack;
  stack.push_back(ListFrame{std::move(root), path, std::move(*names), 0, 1});
  size_t visited = 0;
  while (!stack.empty()) {
    if (++visited % kStopCheckEvery == 0 && stopRequested(ctx)) return fail(cancelled());
    ListFrame& frame = stack.back();
    if (frame.next == frame.names.names.size()) {
      if (frame.names.more) list.truncated = true;  // names beyond what could be shown
      stack.pop_back();
      if (list.truncated) break;
      continue;
    }
    const std::string& name = frame.names.names[frame.next++];
    if (list.entries.size() == max_entries) {
      list.truncated = true;
      break;
    }
    struct stat st {};
    if (::fstatat(frame.fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::string child = childPath(frame.path, name);
    auto info = describeAt(ctx, frame.fd.get(), name.c_str(), child, st);
    if (!info) continue;  // a symlink replaced meanwhile
    list.entries.push_back(std::move(*info));
    if (!S_ISDIR(st.st_mode) || frame.level >= depth) continue;
    UniqueFd sub(
        ::openat(frame.fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) continue;  // unreadable (or replaced by a symlink): listed, not entered
    const size_t room = max_entries - list.entries.size() + 1;
    auto sub_names = readNames(sub.get(), room);
    if (!sub_names) continue;
    const uint32_t level = frame.level + 1;
    stack.push_back(ListFrame{std::move(sub), child, std::move(*sub_names), 0, level});
  }
  return list;
}

Result<proto::FileMkdirResult> makeDirectory(const FileContext& ctx, const std::string& path,
                                             uint32_t mode, bool parents) {
  auto notADirectory = [](const std::string& p) {
    return Error(
        Errc::kAlreadyExists,
        "The path " + p + " exists and is not a directory; remove it or pick another path");
  };
  bool created = false;
  if (path != "/") {
    std::vector<std::string> todo;
    if (parents) {
      for (size_t slash = path.find('/', 1); slash != std::string::npos;
           slash = path.find('/', slash + 1)) {
        todo.push_back(path.substr(0, slash));
      }
    }
    todo.push_back(path);
    for (const auto& dir : todo) {
      const bool last = dir.size() == path.size();
      if (::mkdir(dir.c_str(), last ? mode : 0755) == 0) {
        created = last;
        continue;
      }
      const int err = errno;
      if (err == EEXIST) {
        if (!isDirectory(dir)) return fail(notADirectory(dir));
        continue;
      }
      if (err == ENOENT && !parents) {
        return fail(Errc::kNotFound, "The directory " + parentOf(path) +
                                         " does not exist; make it first or pass parents");
      }
      return fail(fileError(err, dir, ctx.user));
    }
  } else if (!isDirectory(path)) {
    return fail(notADirectory(path));
  }
  // mkdir leaves setuid and setgid to the kernel (setgid comes from the parent); asked for, they
  // are set explicitly.
  if (created && (mode & 06000) != 0 && ::chmod(path.c_str(), mode) != 0) {
    return fail(fileError(errno, path, ctx.user));
  }
  HUTCH_TRY(proto::FileInfo entry, statPath(ctx, path, /*follow=*/true));
  return proto::FileMkdirResult{std::move(entry), created};
}

Result<proto::FileInfo> movePath(const FileContext& ctx, const std::string& from,
                                 const std::string& to, bool overwrite) {
  if (from == "/" || to == "/") {
    return fail(Errc::kInvalidArgument, "The root directory cannot be moved or replaced");
  }
  int r =
      ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), overwrite ? 0 : RENAME_NOREPLACE);
  if (r != 0 && errno == EINVAL && !overwrite) {
    // A filesystem without RENAME_NOREPLACE (or a directory moved into itself, which plain
    // rename reports the same way).
    struct stat st {};
    if (::lstat(to.c_str(), &st) == 0) {
      errno = EEXIST;
    } else {
      r = ::rename(from.c_str(), to.c_str());
    }
  }
  if (r != 0) {
    const int err = errno;
    struct stat st {};
    switch (err) {
      case EEXIST:
      case ENOTEMPTY:
        if (overwrite) {
          return fail(
              Errc::kFailedPrecondition,
              "The directory " + to + " is not empty and cannot be replaced; remove it first");
        }
        return fail(Errc::kAlreadyExists,
                    "The path " + to + " already exists; pass overwrite to replace it");
      case ENOENT:
        if (::lstat(from.c_str(), &st) != 0) return fail(fileError(ENOENT, from, ctx.user));
        return fail(Errc::kNotFound, "The directory " + parentOf(to) + " does not exist");
      case EISDIR:
        return fail(Errc::kInvalidArgument,
                    "The path " + to + " is a directory and " + from + " is not");
      case ENOTDIR:
        return fail(Errc::kInvalidArgument,
                    "The path " + from + " is a directory and " + to +
                        " is not (or a component of a path is not a directory)");
      case EINVAL:
        return fail(Errc::kInvalidArgument,
                    "The directory " + from + " cannot be moved into itself");
      case EXDEV:
        return fail(Errc::kFailedPrecondition,
                    "The paths " + from + " and " + to +
                        " are on different filesystems; copy, then remove the original");
      case EACCES:
      case EPERM:
        // Either side's directory may be the one refused; name both.
        return fail(fileError(err, from + " -> " + to, ctx.user));
      default: return fail(fileError(err, from, ctx.user));
    }
  }
  return statPath(ctx, to, /*follow=*/false);
}

Result<> removePath(const FileContext& ctx, const std::string& path, bool recursive) {
  if (path == "/") return fail(Errc::kInvalidArgument, "The root directory cannot be removed");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return fail(fileError(errno, path, ctx.user));
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0) return fail(fileError(errno, path, ctx.user));
    return ok();
  }
  if (recursive) HUTCH_TRY_VOID(removeTree(ctx, path, st.st_dev));
  if (::rmdir(path.c_str()) != 0) {
    const int err = errno;
    if (err == ENOTEMPTY || err == EEXIST) {
      return fail(Errc::kFailedPrecondition,
                  "The directory " + path + " is not empty; remove it with recursive");
    }
    return fail(fileError(err, path, ctx.user));
  }
  return ok();
}

Result<OpenedFile> openForReading(const FileContext& ctx, const std::string& path) {
  // O_NONBLOCK so that a FIFO does not block the open; it is refused below anyway.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    if (errno == ENXIO) {
      return fail(Errc::kInvalidArgument, "The path " + path + " is not a regular file");
    }
    return fail(fileError(errno, path, ctx.user));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(fileError(errno, path, ctx.user));
  if (S_ISDIR(st.st_mode)) {
    return fail(Errc::kInvalidArgument,
                "The path " + path + " is a directory; list it instead of reading it");
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(Errc::kInvalidArgument, "The path " + path + " is not a regular file");
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return fail(fileError(errno, path, ctx.user));
  }
  return OpenedFile{std::move(fd), describeFile(path, st, "", *ctx.users)};
}

Result<> beginWrite(const FileContext& ctx, PendingWrite& write, const std::string& path,
                    bool parents, const WriteAttributes& attributes) {
  HUTCH_TRY(write.path, followSymlinks(ctx, path));
  if (write.path == "/") return fail(Errc::kInvalidArgument, "The path / is a directory");
  const std::string dir = parentOf(write.path);
  write.name = baseName(write.path);
  if (parents) {
    // The directories missing now, outermost first: those the write makes.
    std::vector<std::string> missing;
    const bool give = attributes.uid.has_value() || attributes.gid.has_value();
    for (std::string d = dir; give && d != "/"; d = parentOf(d)) {
      struct stat st {};
      if (::lstat(d.c_str(), &st) == 0 || errno != ENOENT) break;
      missing.insert(missing.begin(), d);
    }
    HUTCH_TRY_VOID(makeDirectory(ctx, dir, 0755, /*parents=*/true));
    for (const auto& made : missing) {
      const uid_t uid = attributes.uid.value_or(static_cast<uid_t>(-1));
      const gid_t gid = attributes.gid.value_or(static_cast<gid_t>(-1));
      if (::lchown(made.c_str(), uid, gid) != 0) {
        if (errno != EPERM) return fail(fileError(errno, made, ctx.user));
        return fail(permissionDenied(made, ctx.user,
                                     "only root can give the directories it makes to another "
                                     "user; write it as root"));
      }
    }
  }
  write.dir = UniqueFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!write.dir) {
    if (errno == ENOENT) {
      return fail(Errc::kNotFound,
                  "The directory " + dir + " does not exist; make it or pass parents");
    }
    if (errno == ENOTDIR) {
      return fail(Errc::kInvalidArgument, "The path " + dir + " is not a directory");
    }
    return fail(fileError(errno, dir, ctx.user));
  }
  struct stat st {};
  if (::fstatat(write.dir.get(), write.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) return fail(fileError(EISDIR, write.path, ctx.user));
    if (!S_ISREG(st.st_mode)) {
      return fail(Errc::kInvalidArgument, "The path " + write.path + " is not a regular file");
    }
    // Replacing a file takes the right to write it, not only its directory: what the user could
    // not have written in place stays as it is.
    UniqueFd probe(::openat(write.dir.get(), write.name.c_str(),
                            O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!probe && errno != ETXTBSY) return fail(fileError(errno, write.path, ctx.user));
  } else if (errno != ENOENT) {
    return fail(fileError(errno, write.path, ctx.user));
  }
  // ".NAME.hutch-RANDOM" beside the target; the name part is shortened to stay within NAME_MAX.
  for (int attempt = 0; attempt < 4; ++attempt) {
    write.temp_name = "." + write.name.substr(0, 200) + ".hutch-" + randomSuffix();
    write.file = UniqueFd(::openat(write.dir.get(), write.temp_name.c_str(),
                                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (write.file) return ok();
    if (errno != EEXIST) break;
  }
  const int err = errno;
  write.temp_name.clear();
  if (err == EACCES || err == EPERM) {
    return fail(
        permissionDenied(dir, ctx.user, "writing a file takes write permission on its directory"));
  }
  return fail(fileError(err, write.path, ctx.user));
}

Result<> writeChunk(const FileContext& ctx, PendingWrite& write, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(write.file.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(fileError(errno, write.path, ctx.user));
    done += static_cast<size_t>(n);
  }
  return ok();
}

Result<proto::FileInfo> commitWrite(const FileContext& ctx, PendingWrite& write,
                                    const WriteAttributes& attributes) {
  if (::fsync(write.file.get()) != 0) return fail(fileError(errno, write.path, ctx.user));
  struct stat existing {};
  const bool exists =
      ::fstatat(write.dir.get(), write.name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISREG(existing.st_mode);
  struct stat temp {};
  if (::fstat(write.file.get(), &temp) != 0) return fail(fileError(errno, write.path, ctx.user));
  const uint32_t mode = attributes.mode.value_or(exists ? existing.st_mode & 07777 : 0644);
  const uid_t uid = attributes.uid.value_or(exists ? existing.st_uid : temp.st_uid);
  const gid_t gid = attributes.gid.value_or(exists ? existing.st_gid : temp.st_gid);
  // Owner before mode: chown clears setuid and setgid.
  if ((uid != temp.st_uid || gid != temp.st_gid) && ::fchown(write.file.get(), uid, gid) != 0) {
    const int err = errno;
    if (err != EPERM) return fail(fileError(err, write.path, ctx.user));
    const std::string owner = ctx.users->userName(uid) + ":" + ctx.users->groupName(gid);
    return fail(permissionDenied(
        write.path, ctx.user,
        attributes.uid || attributes.gid
            ? "only root can give a file to " + owner + "; write it as root"
            : "it belongs to " + owner +
                  " and only root can keep it so when replacing it; write it as root or as "
                  "its owner"));
  }
  if (::fchmod(write.file.get(), mode) != 0) return fail(fileError(errno, write.path, ctx.user));
  if (::renameat(write.dir.get(), write.temp_name.c_str(), write.dir.get(), write.name.c_str()) !=
      0) {
    return fail(fileError(errno, write.path, ctx.user));
  }
  write.done = true;
  struct stat st {};
  if (::fstat(write.file.get(), &st) != 0) return fail(fileError(errno, write.path, ctx.user));
  write.file.reset();
  write.dir.reset();
  return describeFile(write.path, st, "", *ctx.users);
}

void discardWrite(PendingWrite& write) {
  if (!write.done && write.dir && !write.temp_name.empty()) {
    ::unlinkat(write.dir.get(), write.temp_name.c_str(), 0);
  }
  write.done = true;
  write.file.reset();
  write.dir.reset();
}

}  // namespace hutch::agent

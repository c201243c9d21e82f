#include "jail/box_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include "base/unique_fd.h"
#include "jail/jail_root.h"

namespace hutch::jail {

namespace {

namespace fs = std::filesystem;

Result<> giveTree(int dir_fd, const fs::path& where, BoxIds ids,
                  const std::vector<std::string>& root_owned, int depth) {
  if (depth > 8) return fail(Errc::kFailedPrecondition, where.string() + " is nested too deep");
  if (::fchown(dir_fd, ids.uid, ids.gid) != 0 || ::fchmod(dir_fd, 0700) != 0) {
    return fail(
        sysError("Cannot give " + where.string() + " to uid " + std::to_string(ids.uid), errno));
  }
  int listing_fd = ::dup(dir_fd);
  if (listing_fd < 0) return fail(sysError("Cannot list " + where.string(), errno));
  DIR* listing = ::fdopendir(listing_fd);
  if (listing == nullptr) {
    ::close(listing_fd);
    return fail(sysError("Cannot list " + where.string(), errno));
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(listing, ::closedir);
  while (const dirent* entry = ::readdir(listing)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    fs::path path = where / name;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return fail(sysError("Cannot check " + path.string(), errno));
    }
    bool to_root =
        depth == 0 && std::find(root_owned.begin(), root_owned.end(), name) != root_owned.end();
    uid_t uid = to_root ? 0 : ids.uid;
    gid_t gid = to_root ? 0 : ids.gid;
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return fail(sysError("Cannot open " + path.string(), errno));
      HUTCH_TRY_VOID(giveTree(sub.get(), path, ids, root_owned, depth + 1));
    } else if (S_ISREG(st.st_mode)) {
      if (st.st_nlink != 1) {
        return fail(Errc::kFailedPrecondition,
                    path.string() + " has " + std::to_string(st.st_nlink) +
                        " hard links: refusing to give it to the box (remove the extra links)");
      }
      if (::fchownat(dir_fd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
        return fail(
            sysError("Cannot give " + path.string() + " to uid " + std::to_string(uid), errno));
      }
    } else if (S_ISSOCK(st.st_mode)) {
      // A socket from an earlier run; QEMU replaces it.
      if (::fchownat(dir_fd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
        return fail(sysError("Cannot give " + path.string() + " to the box", errno));
      }
    } else {
      return fail(Errc::kFailedPrecondition,
                  path.string() + " is " + (S_ISLNK(st.st_mode) ? "a symlink" : "a special file") +
                      ": a box directory holds only files and directories; remove it");
    }
  }
  return ok();
}

// Back to root, depth first; planted links and special files go.
Result<> reclaimTree(int dir_fd, const fs::path& where, int depth) {
  if (depth > 8) return fail(Errc::kFailedPrecondition, where.string() + " is nested too deep");
  if (::fchown(dir_fd, 0, 0) != 0 || ::fchmod(dir_fd, 0700) != 0) {
    return fail(sysError("Cannot give " + where.string() + " back to root", errno));
  }
  int listing_fd = ::dup(dir_fd);
  if (listing_fd < 0) return fail(sysError("Cannot list " + where.string(), errno));
  DIR* listing = ::fdopendir(listing_fd);
  if (listing == nullptr) {
    ::close(listing_fd);
    return fail(sysError("Cannot list " + where.string(), errno));
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(listing, ::closedir);
  while (const dirent* entry = ::readdir(listing)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    fs::path path = where / name;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return fail(sysError("Cannot check " + path.string(), errno));
    }
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return fail(sysError("Cannot open " + path.string(), errno));
      HUTCH_TRY_VOID(reclaimTree(sub.get(), path, depth + 1));
    } else if (S_ISREG(st.st_mode) || S_ISSOCK(st.st_mode)) {
      if (::fchownat(dir_fd, name.c_str(), 0, 0, AT_SYMLINK_NOFOLLOW) != 0 && errno != ENOENT) {
        return fail(sysError("Cannot give " + path.string() + " back to root", errno));
      }
    } else if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return fail(sysError("Cannot remove " + path.string(), errno));
    }
  }
  return ok();
}

uint64_t bigEndian(const unsigned char* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | p[i];
  return value;
}

}  // namespace

Result<> prepareBoxDir(const fs::path& dir, BoxIds ids,
                       const std::vector<std::string>& root_owned) {
  if (ids.uid == 0 || ids.gid == 0) {
    return fail(Errc::kInvalidArgument, "A box directory is never given to root");
  }
  HUTCH_TRY(fs::path real, trustedSource(dir));
  UniqueFd fd(::open(real.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open the box directory " + dir.string(), errno));
  return giveTree(fd.get(), real, ids, root_owned, 0);
}

Result<> reclaimBoxDir(const fs::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open the box directory " + dir.string(), errno));
  return reclaimTree(fd.get(), dir, 0);
}

Result<std::vector<fs::path>> checkBackingFiles(const std::vector<fs::path>& chain,
                                                const std::vector<std::string>& allowed) {
  std::vector<fs::path> resolved;
  for (const fs::path& file : chain) {
    char real[PATH_MAX];
    if (::realpath(file.c_str(), real) == nullptr) {
      return fail(sysError("Cannot find the disk layer " + file.string(), errno));
    }
    bool ok = std::any_of(allowed.begin(), allowed.end(), [&](const std::string& pattern) {
      return ::fnmatch(pattern.c_str(), real, FNM_PATHNAME) == 0;
    });
    if (!ok) {
      return fail(Errc::kFailedPrecondition,
                  "The disk names " + file.string() +
                      " as a backing file, which is not one of hutch's disk layers or template "
                      "images: refusing to expose it (the disk may have been tampered with)");
    }
    resolved.emplace_back(real);
  }
  return resolved;
}

std::string globLiteral(const fs::path& path) {
  std::string out;
  for (char c : path.string()) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

Result<std::vector<fs::path>> qcow2BackingChain(const fs::path& image) {
  std::vector<fs::path> chain;
  fs::path current = image;
  // Each capture (fork, checkpoint) adds a layer; each layer is a bind mount in the jail.
  for (int depth = 0; depth < kMaxBackingChain; ++depth) {
    UniqueFd fd(::open(current.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return fail(sysError("Cannot open the disk image " + current.string(), errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return fail(Errc::kInvalidArgument, current.string() + " is not a regular file");
    }
    unsigned char header[20];
    ssize_t n = ::pread(fd.get(), header, sizeof header, 0);
    if (n != static_cast<ssize_t>(sizeof header) || std::memcmp(header, "QFI\xfb", 4) != 0) {
      return chain;  // raw (or too small to be qcow2): no backing file
    }
    uint64_t offset = bigEndian(header + 8, 8);
    uint64_t size = bigEndian(header + 16, 4);
    if (offset == 0 || size == 0) return chain;
    if (size > 1023) {
      return fail(Errc::kInvalidArgument, current.string() + " names a backing file too long");
    }
    std::string name(size, '\0');
    if (::pread(fd.get(), name.data(), size, static_cast<off_t>(offset)) !=
        static_cast<ssize_t>(size)) {
      return fail(sysError("Cannot read the backing file name of " + current.string(), errno));
    }
    fs::path backing = name;
    if (backing.is_relative()) backing = current.parent_path() / backing;
    backing = backing.lexically_normal();
    chain.push_back(backing);
    current = backing;
  }
  return fail(Errc::kInvalidArgument, image.string() + " has a backing chain deeper than " +
                                          std::to_string(kMaxBackingChain));
}

}  // namespace hutch::jail

// RootDir: the only way hutch writes into an image tree (a directory on the host that becomes a
// guest's root file system). The tree's contents come from hostile images, so its symlinks may
// point anywhere ("/", "../../..", "/etc/shadow"); nothing done through a RootDir ever reaches
// outside the tree.
//
// How: the RootDir owns an O_PATH fd of the tree. Every operation cleans its path lexically
// (like Go's filepath.Clean("/" + path): "", ".", "/" are the root; ".." never climbs above it),
// opens the parent directory with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) — so symlinks
// in the parent components resolve inside the tree, as they would inside the guest — and then
// acts on the last component with the *at call that does not follow it (AT_SYMLINK_NOFOLLOW,
// O_NOFOLLOW, unlinkat, linkat without AT_SYMLINK_FOLLOW). Paths are given as inside the image:
// "/usr/bin/x" and "usr/bin/x" are the same.
//
// Errors name the path as inside the image ("/usr/bin/x"); ENOENT is kNotFound, other system
// errors kInternal with the errno; a directory in the way of a non-directory is
// kFailedPrecondition. Not thread-safe for concurrent writers of the same tree; distinct
// RootDirs of distinct trees are independent. Needs Linux 5.6 (openat2).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <ctime>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::image {

class RootDir {
 public:
  // Opens an existing directory of the host as a tree root (following symlinks in host_dir:
  // that path is the caller's, not the image's).
  static Result<RootDir> open(const std::filesystem::path& host_dir);

  RootDir(RootDir&&) noexcept = default;
  RootDir& operator=(RootDir&&) noexcept = default;
  RootDir(const RootDir&) = delete;
  RootDir& operator=(const RootDir&) = delete;

  const std::filesystem::path& hostPath() const { return host_path_; }

  // The cleaned form of an image path: "" for the root, else "a/b" (no leading '/', no "." or
  // "..", ".." at the root dropped).
  static std::string cleanPath(std::string_view path);

  // The entry's own stat (a symlink is not followed); nullopt when it or a parent is missing.
  Result<std::optional<struct stat>> lstat(std::string_view path) const;

  // Creates the directory and its missing parents with `mode` (root-owned); existing ones
  // (including symlinks to directories inside the tree) are kept. kFailedPrecondition when a
  // component is not a directory.
  Result<> mkdirAll(std::string_view path, mode_t mode = 0755);
  // One directory; its parent must exist. An existing directory is fine (kept as it is).
  Result<> mkdir(std::string_view path, mode_t mode);

  // A new empty regular file (mode 0600, owned by the caller) replacing whatever non-directory
  // had the name (unlinked first: never written through). Returned open for writing; set owner
  // and mode on the fd after writing (fchown before fchmod: chown clears setuid bits).
  Result<UniqueFd> createFile(std::string_view path);
  // createFile, the contents written (or copied from `src_fd` to its end), then owner and mode.
  Result<> writeFile(std::string_view path, std::string_view contents, mode_t mode = 0644,
                     uid_t uid = 0, gid_t gid = 0);
  Result<> writeFile(std::string_view path, int src_fd, mode_t mode = 0644, uid_t uid = 0,
                     gid_t gid = 0);

  // A symlink at `path` whose target is stored verbatim (never resolved here), replacing a
  // non-directory.
  Result<> symlink(std::string_view target, std::string_view path);
  // A hard link at `path` to the existing non-directory `target` (an image path, resolved inside
  // the tree; a symlink target is linked itself, not followed), replacing a non-directory.
  Result<> hardlink(std::string_view target, std::string_view path);
  // A FIFO, replacing a non-directory.
  Result<> mkfifo(std::string_view path, mode_t mode);

  // Removes the entry, recursively for a directory, never following a symlink. Missing is fine.
  // The root itself cannot be removed (kInvalidArgument; see removeChildren).
  Result<> remove(std::string_view path);
  // Removes what is inside the directory `path` (not followed if it is a symlink:
  // kFailedPrecondition). `keep`, when given, is asked for each entry by its clean path
  // ("dir/child/grandchild"): a kept directory is descended into, a kept file stays.
  Result<> removeChildren(std::string_view path,
                          const std::function<bool(const std::string&)>& keep = {});

  // Metadata of the entry itself (never of a symlink's target). chmod of a symlink is a no-op
  // (Linux has no symlink modes); setXattr on a symlink is kUnsupported.
  Result<> chown(std::string_view path, uid_t uid, gid_t gid);
  Result<> chmod(std::string_view path, mode_t mode);
  Result<> setXattr(std::string_view path, const std::string& name, std::string_view value);
  Result<> utimens(std::string_view path, const struct timespec& atime,
                   const struct timespec& mtime);

  // Copies the host directory `host_dir` (trusted: the host's, e.g. /lib/modules/<version>)
  // into the tree at `path_in_root` (created as needed): directories, regular files and
  // symlinks with their modes, owned by root; other file types are refused (kUnsupported).
  Result<> copyTreeFrom(const std::filesystem::path& host_dir, std::string_view path_in_root);

 private:
  RootDir(UniqueFd fd, std::filesystem::path host_path)
      : fd_(std::move(fd)), host_path_(std::move(host_path)) {}

  struct Parent {
    UniqueFd fd;        // the parent directory (O_PATH)
    std::string leaf;   // the last component; empty for the root
    std::string shown;  // "/a/b" for messages
  };
  Result<Parent> openParent(std::string_view path) const;
  // An O_PATH fd of a directory of the tree (symlinks resolved inside it).
  Result<UniqueFd> openDirPath(const std::string& clean) const;
  // An O_PATH fd of the entry itself (a symlink is not followed) and its stat.
  struct Entry {
    UniqueFd fd;
    struct stat st {};
  };
  static Result<Entry> openEntry(const Parent& p);
  // Unlinks a non-directory at parent/leaf (missing is fine).
  Result<> unlinkNonDir(const Parent& p) const;
  Result<> copyDir(int src_dir, const std::string& dst_clean);

  UniqueFd fd_;
  std::filesystem::path host_path_;
};

}  // namespace hutch::image

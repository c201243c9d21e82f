#include "jail/jail_root.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "base/unique_fd.h"

namespace hutch::jail {

namespace {

namespace fs = std::filesystem;

// Where the host's root is while the new root is filled; detached before exec.
constexpr const char* kStaging = "/tmp";
constexpr const char* kOldRoot = "/oldroot";

struct Bind {
  fs::path target;  // the path inside the jail (== the listed host path)
  fs::path source;  // resolved host path
  bool writable = false;
  bool exec = false;
};

Result<> sysFail(const std::string& what) {
  return fail(sysError(what, errno));
}

Result<> mountOrFail(const char* source, const fs::path& target, const char* type,
                     unsigned long flags, const char* data, const std::string& what) {
  if (::mount(source, target.c_str(), type, flags, data) != 0) return sysFail(what);
  return ok();
}

// mkdir -p inside the new root. Directories we make are root's, 0755.
Result<> makeDirs(const fs::path& dir) {
  fs::path current = "/";
  for (const auto& part : dir.relative_path()) {
    current /= part;
    if (::mkdir(current.c_str(), 0755) != 0 && errno != EEXIST) {
      return sysFail("Cannot create " + current.string() + " in the jail");
    }
  }
  return ok();
}

Result<> makeMountPoint(const fs::path& target, bool directory) {
  HUTCH_TRY_VOID(makeDirs(target.parent_path()));
  if (directory) {
    if (::mkdir(target.c_str(), 0755) != 0 && errno != EEXIST) {
      return sysFail("Cannot create the mount point " + target.string());
    }
    return ok();
  }
  int fd = ::open(target.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0) {
    if (errno == EEXIST || errno == EROFS || errno == EISDIR) {
      struct stat st {};
      if (::lstat(target.c_str(), &st) == 0) return ok();
    }
    return sysFail("Cannot create the mount point " + target.string());
  }
  ::close(fd);
  return ok();
}

// Bind-mounts the host's `source` (seen under /oldroot) at `target` with the given access.
Result<> bindMount(const Bind& bind) {
  fs::path from = fs::path(kOldRoot) / bind.source.relative_path();
  struct stat st {};
  if (::stat(from.c_str(), &st) != 0) return sysFail("Cannot find " + bind.source.string());
  HUTCH_TRY_VOID(makeMountPoint(bind.target, S_ISDIR(st.st_mode)));
  HUTCH_TRY_VOID(mountOrFail(from.c_str(), bind.target, nullptr, MS_BIND, nullptr,
                             "Cannot bind " + bind.source.string() + " into the jail"));
  unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV;
  if (!bind.writable) flags |= MS_RDONLY;
  if (!bind.exec) flags |= MS_NOEXEC;
  return mountOrFail(nullptr, bind.target, nullptr, flags, nullptr,
                     "Cannot restrict the mount of " + bind.target.string() + " in the jail");
}

bool isDefaultDevice(const fs::path& device) {
  const auto& defaults = defaultDevices();
  return std::find(defaults.begin(), defaults.end(), device) != defaults.end();
}

// A fresh node with the host device's numbers: defaults 0666 like the host's, the others (kvm,
// net/tun) 0660 root:<box gid>, so only this box's uid can open them. Falls back to a bind of the
// host node where mknod is not allowed.
Result<> makeDevice(const fs::path& device, gid_t gid) {
  fs::path host = fs::path(kOldRoot) / device.relative_path();
  struct stat st {};
  if (::stat(host.c_str(), &st) != 0) return sysFail("Cannot find device " + device.string());
  if (!S_ISCHR(st.st_mode)) {
    return fail(Errc::kInvalidArgument, device.string() + " is not a character device");
  }
  HUTCH_TRY_VOID(makeDirs(device.parent_path()));
  bool shared = isDefaultDevice(device);
  mode_t mode = shared ? 0666 : 0660;
  if (::mknod(device.c_str(), S_IFCHR | mode, st.st_rdev) == 0) {
    if (::chown(device.c_str(), 0, shared ? 0 : gid) != 0 || ::chmod(device.c_str(), mode) != 0) {
      return sysFail("Cannot set the owner of " + device.string());
    }
    return ok();
  }
  if (errno != EPERM) return sysFail("Cannot create device " + device.string());
  HUTCH_TRY_VOID(makeMountPoint(device, false));
  return mountOrFail(host.c_str(), device, nullptr, MS_BIND, nullptr,
                     "Cannot bind device " + device.string());
}

Result<> makeDev(const JailSpec& spec) {
  HUTCH_TRY_VOID(makeDirs("/dev"));
  // Its own tmpfs, the only mount without nodev: devices work here and nowhere else.
  HUTCH_TRY_VOID(mountOrFail("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
                             "mode=0755,size=64k,nr_inodes=64", "Cannot mount /dev in the jail"));
  std::vector<fs::path> devices = defaultDevices();
  for (const fs::path& device : spec.devices) {
    if (std::find(devices.begin(), devices.end(), device) == devices.end()) {
      devices.push_back(device);
    }
  }
  for (const fs::path& device : devices) HUTCH_TRY_VOID(makeDevice(device, spec.gid));
  const std::pair<const char*, const char*> links[] = {{"/proc/self/fd", "/dev/fd"},
                                                       {"/proc/self/fd/0", "/dev/stdin"},
                                                       {"/proc/self/fd/1", "/dev/stdout"},
                                                       {"/proc/self/fd/2", "/dev/stderr"}};
  for (const auto& [to, at] : links) {
    if (::symlink(to, at) != 0) return sysFail(std::string("Cannot create ") + at);
  }
  return mountOrFail(nullptr, "/dev", nullptr,
                     MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, nullptr,
                     "Cannot make /dev read-only");
}

// Where /proc has no subset=pid (Linux before 5.8) these stay visible: read-only binds keep a
// process from writing them even where a file's mode would let it (runc's read-only paths).
constexpr const char* kProcReadOnly[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
                                         "/proc/bus", "/proc/fs"};

// /proc of the jail's PID namespace, showing only its own processes (hidepid: not even those of
// other uids) and, where the kernel can (5.8+, subset=pid), nothing else: no /proc/sys,
// /proc/kallsyms, /proc/sysrq-trigger... Kernels without subset=pid, or a spec asking for it
// (legacy_proc, tests), get hidepid=2 and the paths above read-only.
Result<> makeProc(bool legacy) {
  HUTCH_TRY_VOID(makeDirs("/proc"));
  unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (!legacy && ::mount("proc", "/proc", "proc", flags, "subset=pid,hidepid=invisible") == 0) {
    return ok();
  }
  HUTCH_TRY_VOID(
      mountOrFail("proc", "/proc", "proc", flags, "hidepid=2", "Cannot mount /proc in the jail"));
  for (const char* path : kProcReadOnly) {
    struct stat st {};
    if (::lstat(path, &st) != 0) continue;  // e.g. no /proc/bus without PCI
    HUTCH_TRY_VOID(mountOrFail(path, path, nullptr, MS_BIND | MS_REC, nullptr,
                               std::string("Cannot bind ") + path + " in the jail"));
    HUTCH_TRY_VOID(mountOrFail(nullptr, path, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | flags,
                               nullptr, std::string("Cannot make ") + path + " read-only"));
  }
  return ok();
}

int depth(const fs::path& path) {
  return static_cast<int>(std::distance(path.begin(), path.end()));
}

}  // namespace

const std::vector<SystemPath>& systemPaths() {
  static const std::vector<SystemPath> paths = {
      {"/usr", true},
      {"/bin", true},
      {"/sbin", true},
      {"/lib", true},
      {"/lib32", true},
      {"/lib64", true},
      {"/libx32", true},
      {"/etc/ld.so.cache", false},
      {"/etc/localtime", false},
  };
  return paths;
}

Result<fs::path> trustedSource(const fs::path& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return fail(sysError("Cannot expose " + path.string() + " in the jail", errno));
  }
  fs::path real = resolved;
  fs::path dir = "/";
  for (const auto& part : real.parent_path().relative_path()) {
    dir /= part;
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0)
      return fail(sysError("Cannot check " + dir.string(), errno));
    bool writable_by_others =
        (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0;
    if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || writable_by_others) {
      return fail(Errc::kFailedPrecondition,
                  "Refusing to expose " + path.string() + " in the jail: " + dir.string() +
                      " above it is owned by uid " + std::to_string(st.st_uid) +
                      (writable_by_others ? " and writable by others" : "") +
                      ", so it could be swapped; keep jail files in root-owned directories");
    }
  }
  return real;
}

Result<> buildRoot(const JailSpec& spec) {
  // Resolve and check every source on the host before anything moves.
  std::vector<Bind> binds;
  std::vector<std::pair<fs::path, fs::path>> symlinks;  // at, to
  for (const SystemPath& system : systemPaths()) {
    struct stat st {};
    if (::lstat(system.path.c_str(), &st) != 0) continue;  // e.g. no /libx32
    if (S_ISLNK(st.st_mode) && system.path.parent_path() == "/") {
      // Merged /usr: /lib -> usr/lib. Recreate the link; its target is bound anyway.
      char target[PATH_MAX];
      ssize_t n = ::readlink(system.path.c_str(), target, sizeof target - 1);
      if (n < 0) return sysFail("Cannot read the link " + system.path.string());
      target[n] = '\0';
      symlinks.emplace_back(system.path, fs::path(target));
      continue;
    }
    HUTCH_TRY(fs::path source, trustedSource(system.path));
    binds.push_back({system.path, source, false, system.exec});
  }
  for (const BindPath& path : spec.paths) {
    HUTCH_TRY(fs::path source, trustedSource(path.path));
    binds.push_back({path.path.lexically_normal(), source,
                     path.access == BindPath::Access::kReadWrite, path.exec});
  }
  // Parents before children: a file inside a bound directory is mounted over it.
  std::stable_sort(binds.begin(), binds.end(),
                   [](const Bind& a, const Bind& b) { return depth(a.target) < depth(b.target); });

  // No mount event may travel between the jail and the host, in either direction.
  HUTCH_TRY_VOID(mountOrFail(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr,
                             "Cannot make the mounts private"));
  // The new root: an empty tmpfs. Pivot into it with the host root kept at /oldroot while the
  // binds are made (the tmpfs then no longer covers the host's /tmp, which stays reachable).
  HUTCH_TRY_VOID(mountOrFail("tmpfs", kStaging, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                             "mode=0755,size=1m,nr_inodes=4096", "Cannot mount the jail's root"));
  fs::path old_root = fs::path(kStaging) / fs::path(kOldRoot).relative_path();
  if (::mkdir(old_root.c_str(), 0700) != 0) return sysFail("Cannot create " + old_root.string());
  if (::syscall(SYS_pivot_root, kStaging, old_root.c_str()) != 0) {
    return sysFail("Cannot pivot into the jail's root");
  }
  if (::chdir("/") != 0) return sysFail("Cannot enter the jail's root");

  // Links first: a listed path under /lib then lands in the bound /usr/lib it points to.
  for (const auto& [at, to] : symlinks) {
    if (::symlink(to.c_str(), at.c_str()) != 0) return sysFail("Cannot create " + at.string());
  }
  for (const Bind& bind : binds) HUTCH_TRY_VOID(bindMount(bind));
  HUTCH_TRY_VOID(makeDev(spec));
  HUTCH_TRY_VOID(makeProc(spec.legacy_proc));

  if (::umount2(kOldRoot, MNT_DETACH) != 0) return sysFail("Cannot detach the host's root");
  if (::rmdir(kOldRoot) != 0) return sysFail("Cannot remove /oldroot");
  HUTCH_TRY_VOID(mountOrFail(nullptr, "/", nullptr,
                             MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                             nullptr, "Cannot make the jail's root read-only"));
  return ok();
}

}  // namespace hutch::jail

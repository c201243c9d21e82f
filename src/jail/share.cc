#include "jail/share.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "base/unique_fd.h"
#include "sys/files.h"

namespace hutch::jail {

namespace fs = std::filesystem;

namespace {

// virtiofsd keeps a descriptor per inode the guest looks up: plenty, and bounded.
constexpr rlim_t kShareOpenFiles = 65536;

Error sysFail(const std::string& what) {
  return sysError(what, errno);
}

Result<uint32_t> parseId(std::string_view text, std::string_view what) {
  uint32_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return fail(Errc::kInvalidArgument,
                std::string(what) + " '" + std::string(text) + "' is not a number");
  }
  return value;
}

Result<> writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(sysFail("Cannot write"));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return ok();
}

Result<> writeProcFile(pid_t pid, const char* name, std::string_view content) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return fail(sysFail("Cannot open " + path));
  // One write: the kernel takes a map only whole.
  ssize_t n = ::write(fd.get(), content.data(), content.size());
  if (n != static_cast<ssize_t>(content.size())) return fail(sysFail("Cannot write " + path));
  return ok();
}

// Reads one byte; false at end of file (the other side closed or exited).
bool readByte(int fd) {
  char c = 0;
  for (;;) {
    ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    return n == 1;
  }
}

[[noreturn]] void childFail(int error_fd, int err) {
  (void)!::write(error_fd, &err, sizeof err);
  ::_exit(127);
}

// The child: a new user namespace, root in it once the parent wrote the maps, then exec.
[[noreturn]] void runChild(int ready_fd, int go_fd, int error_fd,
                           const std::vector<std::string>& argv) {
  if (::unshare(CLONE_NEWUSER) != 0) childFail(error_fd, errno);
  if (!writeAll(ready_fd, "u")) childFail(error_fd, errno);
  if (!readByte(go_fd)) childFail(error_fd, ECANCELED);
  if (::setgroups(0, nullptr) != 0 || ::setresgid(0, 0, 0) != 0 || ::setresuid(0, 0, 0) != 0) {
    childFail(error_fd, errno);
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) childFail(error_fd, errno);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char* env[] = {const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), nullptr};
  ::execve(args[0], args.data(), env);
  childFail(error_fd, errno);
}

}  // namespace

std::string shareUidMap(const ShareSpec& spec, uid_t owner_uid) {
  return "0 " + std::to_string(spec.box.uid) + " 1\n" + std::to_string(kShareGuestUid) + " " +
         std::to_string(owner_uid) + " 1\n";
}

std::string shareGidMap(const ShareSpec& spec, gid_t owner_gid) {
  return "0 " + std::to_string(spec.box.gid) + " 1\n" + std::to_string(kShareGuestGid) + " " +
         std::to_string(owner_gid) + " 1\n";
}

std::vector<std::string> shareCommand(const fs::path& jail_binary, const ShareSpec& spec,
                                      const std::vector<std::string>& program) {
  std::vector<std::string> argv = {
      jail_binary.string(),
      "--share",
      "--name",
      spec.name,
      "--dir",
      spec.dir.string(),
      "--box-ids",
      std::to_string(spec.box.uid) + ":" + std::to_string(spec.box.gid)};
  if (spec.read_only) argv.emplace_back("--read-only");
  argv.emplace_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

Result<ShareSpec> parseShareArgs(const std::vector<std::string>& args) {
  ShareSpec spec;
  bool have_ids = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--read-only") {
      spec.read_only = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      return fail(Errc::kInvalidArgument, "hutch-jail --share: '" + arg + "' needs a value");
    }
    const std::string& value = args[++i];
    if (arg == "--name") {
      spec.name = value;
    } else if (arg == "--dir") {
      spec.dir = value;
    } else if (arg == "--box-ids") {
      size_t colon = value.find(':');
      if (colon == std::string::npos) {
        return fail(Errc::kInvalidArgument, "hutch-jail --share: --box-ids wants UID:GID");
      }
      HUTCH_TRY(spec.box.uid, parseId(std::string_view(value).substr(0, colon), "uid"));
      HUTCH_TRY(spec.box.gid, parseId(std::string_view(value).substr(colon + 1), "gid"));
      have_ids = true;
    } else {
      return fail(Errc::kInvalidArgument, "hutch-jail --share: unknown argument '" + arg + "'");
    }
  }
  if (spec.dir.empty() || !spec.dir.is_absolute()) {
    return fail(Errc::kInvalidArgument, "hutch-jail --share: --dir wants an absolute path");
  }
  if (!have_ids || spec.box.uid == 0 || spec.box.gid == 0) {
    return fail(Errc::kInvalidArgument,
                "hutch-jail --share: --box-ids wants the box's own ids (never root's)");
  }
  return spec;
}

namespace {

Result<struct stat> checkShareStat(const fs::path& dir, const struct stat& st) {
  if (S_ISLNK(st.st_mode)) {
    return fail(Errc::kInvalidArgument,
                dir.string() + " is a symbolic link: share the directory it points to");
  }
  if (!S_ISDIR(st.st_mode)) {
    return fail(Errc::kInvalidArgument, dir.string() + " is not a directory: share a directory");
  }
  if (st.st_uid == 0) {
    return fail(Errc::kInvalidArgument,
                dir.string() +
                    " belongs to root: what a box writes into a share belongs to the directory's "
                    "owner, and a box never writes as the host's root. Share a directory owned "
                    "by an ordinary user (chown USER " +
                    dir.string() + ")");
  }
  return st;
}

}  // namespace

Result<> checkShareDir(const fs::path& dir) {
  if (dir.empty() || !dir.is_absolute()) {
    return fail(Errc::kInvalidArgument,
                "The host directory '" + dir.string() + "' must be an absolute path");
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return fail(Errc::kInvalidArgument,
                  "The host directory " + dir.string() + " does not exist: create it first");
    }
    return fail(sysFail("Cannot check the host directory " + dir.string()));
  }
  HUTCH_TRY_VOID(checkShareStat(dir, st));
  return ok();
}

Result<> enterShareAndExec(const ShareSpec& spec, const std::vector<std::string>& argv,
                           bool* exec_failed) {
  *exec_failed = false;
  if (argv.empty()) return fail(Errc::kInvalidArgument, "No program to run");
  if (::geteuid() != 0) return fail(Errc::kPermissionDenied, "hutch-jail --share must run as root");
  // 2 (first the namespace: a bind's source must be a mount of the caller's namespace). A
  // private mount namespace with DIR bound on itself.
  if (::unshare(CLONE_NEWNS) != 0) return fail(sysFail("Cannot make a mount namespace"));
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return fail(sysFail("Cannot make the mounts private"));
  }
  // 1. The directory, by descriptor: what is checked is what is shared.
  UniqueFd dir(::open(spec.dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return fail(sysFail("Cannot open the shared directory " + spec.dir.string()));
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0) return fail(sysFail("Cannot check " + spec.dir.string()));
  HUTCH_TRY_VOID(checkShareStat(spec.dir, st));
  // Shown at kShareMountPoint, on a tmpfs of this namespace: the box's ids may not be allowed
  // to walk the path to DIR itself (a parent only root may enter).
  const fs::path mount_point(kShareMountPoint);
  const fs::path parent = mount_point.parent_path();
  if (::mount("tmpfs", parent.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0755,size=64k") != 0) {
    return fail(sysFail("Cannot mount a tmpfs on " + parent.string()));
  }
  if (::mkdir(mount_point.c_str(), 0755) != 0) {
    return fail(sysFail("Cannot make " + mount_point.string()));
  }
  std::string by_fd = "/proc/self/fd/" + std::to_string(dir.get());
  if (::mount(by_fd.c_str(), mount_point.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return fail(sysFail("Cannot bind " + spec.dir.string()));
  }
  unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV;
  if (spec.read_only) flags |= MS_RDONLY;
  if (::mount(nullptr, mount_point.c_str(), nullptr, flags, nullptr) != 0) {
    return fail(sysFail("Cannot restrict the bind of " + spec.dir.string()));
  }
  // The bind must be the directory checked above.
  struct stat bound {};
  if (::stat(mount_point.c_str(), &bound) != 0 || bound.st_ino != st.st_ino ||
      bound.st_dev != st.st_dev) {
    return fail(Errc::kFailedPrecondition,
                spec.dir.string() + " changed while it was being shared; try again");
  }
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = std::min(files.rlim_max, kShareOpenFiles);
    files.rlim_max = files.rlim_cur;
    if (::setrlimit(RLIMIT_NOFILE, &files) != 0) return fail(sysFail("Cannot set RLIMIT_NOFILE"));
  }

  // 3. The child in its user namespace; this process writes its maps.
  int ready[2];
  int go[2];
  int errors[2];
  if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0 ||
      ::pipe2(errors, O_CLOEXEC) != 0) {
    return fail(sysFail("Cannot make pipes"));
  }
  UniqueFd ready_r(ready[0]), ready_w(ready[1]), go_r(go[0]), go_w(go[1]), errors_r(errors[0]),
      errors_w(errors[1]);
  pid_t child = ::fork();
  if (child < 0) return fail(sysFail("Cannot fork"));
  if (child == 0) runChild(ready_w.get(), go_r.get(), errors_w.get(), argv);
  ready_w.reset();
  go_r.reset();
  errors_w.reset();
  auto giveUp = [&](Error error) {
    ::kill(child, SIGKILL);
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    return error;
  };
  if (!readByte(ready_r.get())) {
    int err = 0;
    (void)!::read(errors_r.get(), &err, sizeof err);
    return fail(giveUp(sysError("Cannot make a user namespace", err)));
  }
  if (auto w = writeProcFile(child, "uid_map", shareUidMap(spec, st.st_uid)); !w) {
    return fail(giveUp(w.error()));
  }
  if (auto w = writeProcFile(child, "gid_map", shareGidMap(spec, st.st_gid)); !w) {
    return fail(giveUp(w.error()));
  }
  if (auto w = writeAll(go_w.get(), "g"); !w) return fail(giveUp(w.error()));
  // 4. The error pipe closes at exec (CLOEXEC): nothing read means the program runs.
  int err = 0;
  ssize_t n = 0;
  do {
    n = ::read(errors_r.get(), &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof err)) {
    *exec_failed = true;
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    return fail(sysError("Cannot run " + argv.front() + " for the share", err));
  }
  return ok();
}

}  // namespace hutch::jail

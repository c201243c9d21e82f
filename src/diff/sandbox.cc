#include "diff/sandbox.h"

#include <errno.h>
#include <fmt/format.h>
#include <grp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <memory>
#include <string>

namespace hutch::diff {
namespace {

Result<> setLimit(int resource, rlim_t value, const char* name) {
  rlimit limit{value, value};
  if (::setrlimit(resource, &limit) != 0)
    return fail(sysError(std::string("setrlimit ") + name, errno));
  return ok();
}

}  // namespace

Result<> dropPrivileges(uid_t uid, gid_t gid) {
  if (uid == 0 || gid == 0) {
    return fail(Errc::kInvalidArgument, "hutch-diff runs as the box's own ids, never root's");
  }
  if (::geteuid() == 0) {
    if (::unshare(CLONE_NEWNET | CLONE_NEWIPC) != 0) {
      return fail(sysError("unshare(CLONE_NEWNET|CLONE_NEWIPC)", errno));
    }
    if (::setgroups(0, nullptr) != 0) return fail(sysError("setgroups", errno));
  }
  if (::setresgid(gid, gid, gid) != 0) return fail(sysError("setresgid", errno));
  if (::setresuid(uid, uid, uid) != 0) return fail(sysError("setresuid", errno));
  if (::setuid(0) == 0 || ::geteuid() != uid) {
    return fail(Errc::kInternal, "hutch-diff could become root again after dropping its ids");
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail(sysError("no_new_privs", errno));
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return fail(sysError("dumpable", errno));
  HUTCH_TRY_VOID(setLimit(RLIMIT_CORE, 0, "RLIMIT_CORE"));
  HUTCH_TRY_VOID(setLimit(RLIMIT_NOFILE, 64, "RLIMIT_NOFILE"));
  HUTCH_TRY_VOID(setLimit(RLIMIT_CPU, 600, "RLIMIT_CPU"));
  return ok();
}

Result<> confine() {
  struct Free {
    void operator()(void* ctx) const { seccomp_release(ctx); }
  };
  std::unique_ptr<void, Free> ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)));
  if (!ctx) return fail(Errc::kInternal, "seccomp_init failed");
  // What reading images already open, writing results to open descriptors, and the C and C++
  // runtimes (malloc, threads' futexes, abort) need; nothing that names a path.
  static constexpr const char* kAllowed[] = {
      "read",           "pread64",      "readv",         "preadv",       "write",
      "writev",         "pwrite64",     "lseek",         "close",        "fstat",
      "mmap",           "munmap",       "mremap",        "madvise",      "brk",
      "mprotect",       "futex",        "exit",          "exit_group",   "rt_sigreturn",
      "rt_sigprocmask", "rt_sigaction", "clock_gettime", "gettimeofday", "getrandom",
      "sched_yield",    "getpid",       "gettid",        "tgkill",       "fcntl",
      "newfstatat",     "statx",        "fsync",         "fdatasync"};
  for (const char* name : kAllowed) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 0); rc != 0) {
      return fail(Errc::kInternal, fmt::format("seccomp: allow {}: error {}", name, rc));
    }
  }
  if (int rc = seccomp_load(ctx.get()); rc != 0) {
    return fail(Errc::kInternal, fmt::format("seccomp: load the filter: error {}", rc));
  }
  return ok();
}

}  // namespace hutch::diff

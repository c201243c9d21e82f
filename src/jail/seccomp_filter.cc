#include "jail/seccomp_filter.h"

#include <sched.h>
#include <seccomp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <memory>

namespace hutch::jail {

namespace {

// What SCMP_A0() builds, without the C compound literal. Arguments are compared as 64-bit values:
// a socket family with garbage in the upper half is >= AF_MAX and so denied, not let through.
scmp_arg_cmp arg0(scmp_compare op, uint64_t a, uint64_t b = 0) {
  return scmp_arg_cmp{.arg = 0, .op = op, .datum_a = a, .datum_b = b};
}

struct ContextDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using Context = std::unique_ptr<void, ContextDeleter>;

Result<> check(int rc, const std::string& what) {
  if (rc < 0) return fail(sysError("seccomp: cannot " + what, -rc));
  return ok();
}

int familyNumber(const std::string& name) {
  if (name == "unix") return AF_UNIX;
  if (name == "inet") return AF_INET;
  if (name == "inet6") return AF_INET6;
  if (name == "netlink") return AF_NETLINK;
  return -1;
}

}  // namespace

const std::vector<std::string>& deniedSyscalls() {
  static const std::vector<std::string> names = {
      // other processes
      "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
      // namespaces and mounts
      "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig",
      "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
      // kernel interfaces with a history of exploits that QEMU does not use here
      "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "io_uring_setup",
      "io_uring_enter", "io_uring_register", "fanotify_init", "name_to_handle_at",
      "open_by_handle_at",
      // the machine itself
      "kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module",
      "acct", "swapon", "swapoff", "quotactl", "quotactl_fd", "syslog", "vhangup", "iopl", "ioperm",
      "lookup_dcookie", "uselib", "nfsservctl"};
  return names;
}

Result<> installSeccompFilter(const std::vector<std::string>& socket_families) {
  Context ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return fail(Errc::kInternal, "seccomp: cannot create a filter");
  HUTCH_TRY_VOID(check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS),
                       "kill other architectures"));
  for (const std::string& name : deniedSyscalls()) {
    int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) continue;  // unknown to this libseccomp: the kernel predates it
    HUTCH_TRY_VOID(
        check(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), nr, 0), "deny " + name));
  }
  // clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc use clone.
  HUTCH_TRY_VOID(check(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0),
                       "deny clone3"));
  const unsigned long namespace_flags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                           CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                           CLONE_NEWCGROUP};
  for (unsigned long flag : namespace_flags) {
    HUTCH_TRY_VOID(check(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                          arg0(SCMP_CMP_MASKED_EQ, flag, flag)),
                         "deny clone with namespace flags"));
  }
  std::vector<int> allowed;
  for (const std::string& name : socket_families) {
    int family = familyNumber(name);
    if (family < 0) return fail(Errc::kInvalidArgument, "Unknown socket family '" + name + "'");
    allowed.push_back(family);
  }
  for (int sys : {SCMP_SYS(socket), SCMP_SYS(socketpair)}) {
    for (int family = 0; family < AF_MAX; ++family) {
      if (std::find(allowed.begin(), allowed.end(), family) != allowed.end()) continue;
      HUTCH_TRY_VOID(check(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EAFNOSUPPORT), sys, 1,
                                            arg0(SCMP_CMP_EQ, static_cast<uint64_t>(family))),
                           "restrict socket families"));
    }
    HUTCH_TRY_VOID(check(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EAFNOSUPPORT), sys, 1,
                                          arg0(SCMP_CMP_GE, AF_MAX)),
                         "restrict socket families"));
  }
  return check(seccomp_load(ctx.get()), "load the filter");
}

}  // namespace hutch::jail

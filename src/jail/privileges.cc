#include "jail/privileges.h"

#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace hutch::jail {

namespace {

Result<> sysFail(const std::string& what) {
  return fail(sysError(what, errno));
}

Result<> setLimit(int resource, rlim_t value, const char* name) {
  struct rlimit limit {
    value, value
  };
  if (::setrlimit(resource, &limit) != 0) return sysFail(std::string("Cannot set ") + name);
  return ok();
}

struct CapSets {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
};

}  // namespace

Result<> setResourceLimits(const JailSpec& spec) {
  HUTCH_TRY_VOID(setLimit(RLIMIT_CORE, 0, "RLIMIT_CORE"));
  HUTCH_TRY_VOID(setLimit(RLIMIT_NOFILE, spec.max_open_files, "RLIMIT_NOFILE"));
  if (spec.max_processes != 0) {
    HUTCH_TRY_VOID(setLimit(RLIMIT_NPROC, spec.max_processes, "RLIMIT_NPROC"));
  }
  return ok();
}

Result<> closeOtherFds(const std::vector<int>& keep) {
  std::vector<int> sorted = keep;
  std::sort(sorted.begin(), sorted.end());
  unsigned int from = 3;
  for (int fd : sorted) {
    if (fd < static_cast<int>(from)) continue;
    if (fd > static_cast<int>(from) &&
        ::syscall(SYS_close_range, from, fd - 1, CLOSE_RANGE_CLOEXEC) != 0) {
      return sysFail("Cannot mark descriptors close-on-exec");
    }
    from = static_cast<unsigned int>(fd) + 1;
  }
  if (::syscall(SYS_close_range, from, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    return sysFail("Cannot mark descriptors close-on-exec");
  }
  return ok();
}

Result<> dropPrivileges(uid_t uid, gid_t gid) {
  // The bounding set caps what any later exec could gain; dropping needs CAP_SETPCAP, so first.
  for (int cap = 0; ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      return sysFail("Cannot drop capability " + std::to_string(cap) + " from the bounding set");
    }
  }
  // uid 0 gets no capabilities back on exec, and that cannot be undone.
  unsigned long securebits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                             SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                             SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (::prctl(PR_SET_SECUREBITS, securebits, 0, 0, 0) != 0) return sysFail("Cannot set securebits");
  if (::setgroups(0, nullptr) != 0) return sysFail("Cannot clear the supplementary groups");
  if (::setresgid(gid, gid, gid) != 0) return sysFail("Cannot set gid " + std::to_string(gid));
  // Leaving uid 0 clears the permitted and effective sets (SECBIT_KEEP_CAPS is off and locked).
  if (::setresuid(uid, uid, uid) != 0) return sysFail("Cannot set uid " + std::to_string(uid));
  CapSets none;
  if (::syscall(SYS_capset, &none.header, none.data) != 0) {
    return sysFail("Cannot clear the capability sets");
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    return sysFail("Cannot clear the ambient capabilities");
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return sysFail("Cannot set no_new_privs");

  // Trust, but verify: a silently failed step must not leave a privileged QEMU.
  uid_t ruid = 0;
  uid_t euid = 0;
  uid_t suid = 0;
  gid_t rgid = 0;
  gid_t egid = 0;
  gid_t sgid = 0;
  ::getresuid(&ruid, &euid, &suid);
  ::getresgid(&rgid, &egid, &sgid);
  CapSets now;
  bool caps_clear = ::syscall(SYS_capget, &now.header, now.data) == 0;
  for (const auto& set : now.data) {
    caps_clear = caps_clear && set.effective == 0 && set.permitted == 0 && set.inheritable == 0;
  }
  bool bounding_clear = true;
  for (int cap = 0, in_set = 0; (in_set = ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0)) >= 0; ++cap) {
    bounding_clear = bounding_clear && in_set == 0;
  }
  if (ruid != uid || euid != uid || suid != uid || rgid != gid || egid != gid || sgid != gid ||
      ::getgroups(0, nullptr) != 0 || !caps_clear || !bounding_clear ||
      ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 || ::setuid(0) == 0) {
    return fail(Errc::kInternal, "Dropping privileges did not take effect: refusing to run");
  }
  return ok();
}

}  // namespace hutch::jail

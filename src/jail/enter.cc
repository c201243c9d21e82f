#include "jail/enter.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

#include "base/unique_fd.h"
#include "jail/box_ids.h"
#include "jail/jail_root.h"
#include "jail/privileges.h"
#include "jail/seccomp_filter.h"

namespace hutch::jail {

namespace {

Result<> sysFail(const std::string& what) {
  return fail(sysError(what, errno));
}

Result<> joinNetwork(const JailSpec& spec) {
  if (!spec.netns) {
    // No networking yet: an empty namespace (a loopback that is down) instead of the host's.
    if (::unshare(CLONE_NEWNET) != 0) return sysFail("Cannot create a network namespace");
    return ok();
  }
  UniqueFd ns(::open(spec.netns->c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return sysFail("Cannot open the network namespace " + spec.netns->string());
  if (::setns(ns.get(), CLONE_NEWNET) != 0) {
    return sysFail("Cannot join the network namespace " + spec.netns->string());
  }
  return ok();
}

}  // namespace

Result<> enterJailAndExec(const JailSpec& spec, const std::vector<std::string>& argv,
                          bool* exec_failed) {
  *exec_failed = false;
  HUTCH_TRY_VOID(spec.validate());
  if (argv.empty() || argv.front().empty() || argv.front().front() != '/') {
    return fail(Errc::kInvalidArgument, "The program to jail must be given by its absolute path");
  }
  if (::geteuid() != 0) return fail(Errc::kFailedPrecondition, "hutch-jail must run as root");
  if (::getpid() != 1) {
    return fail(Errc::kFailedPrecondition,
                "hutch-jail must be PID 1 of a new PID namespace: start it with sys::spawn "
                "clone_flags = CLONE_NEWPID (or unshare --pid --fork)");
  }
  // A uid still in use means an earlier process of this box (or another box given the same id)
  // lives: sharing the uid would let them signal and ptrace each other. The lock makes the scan
  // race-free between jails; the program inherits it, so it is held while the program lives.
  HUTCH_TRY(UniqueFd uid_lock, lockUid(spec.uid));
  // The box's shared-folder servers have its uid too, in a user namespace of their own: they
  // are started for this QEMU (which talks to them over its sockets, and which its PID namespace
  // keeps from seeing them) and end with it.
  HUTCH_TRY(auto users, processesWithUid(spec.uid));
  std::erase_if(users, [](pid_t pid) { return !inOwnUserNamespace(pid); });
  if (!users.empty()) {
    return fail(Errc::kFailedPrecondition,
                "uid " + std::to_string(spec.uid) + " is still used by host pid " +
                    std::to_string(users.front()) + ": refusing to share it with a new box");
  }

  if (spec.cgroup) {
    HUTCH_TRY_VOID(spec.cgroup->create());
    HUTCH_TRY(AppliedLimits applied, spec.cgroup->applyLimits(spec.limits));
    for (const std::string& warning : applied.warnings) {
      std::fprintf(stderr, "hutch-jail: %s: warning: %s\n", spec.name.c_str(), warning.c_str());
    }
    HUTCH_TRY_VOID(spec.cgroup->join());
  }
  HUTCH_TRY_VOID(joinNetwork(spec));
  if (::unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) != 0) {
    return sysFail("Cannot create the jail's namespaces");
  }
  std::string hostname = spec.hostname.empty() ? "hutch-" + spec.name : spec.hostname;
  if (hostname.size() > 64) hostname.resize(64);
  if (::sethostname(hostname.data(), hostname.size()) != 0)
    return sysFail("Cannot set the hostname");

  HUTCH_TRY_VOID(buildRoot(spec));
  std::string cwd = spec.cwd.empty() ? std::string("/") : spec.cwd.string();
  if (::chdir(cwd.c_str()) != 0) return sysFail("Cannot enter " + cwd + " in the jail");
  HUTCH_TRY_VOID(setResourceLimits(spec));
  std::vector<int> keep = spec.keep_fds;
  keep.push_back(uid_lock.get());
  HUTCH_TRY_VOID(closeOtherFds(keep));
  if (::fcntl(uid_lock.get(), F_SETFD, 0) != 0) return sysFail("Cannot hand on the uid lock");
  ::umask(077);
  HUTCH_TRY_VOID(dropPrivileges(spec.uid, spec.gid));
  if (spec.seccomp) HUTCH_TRY_VOID(installSeccompFilter(spec.socket_families));

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  env.reserve(spec.env.size() + 1);
  for (const std::string& var : spec.env) env.push_back(const_cast<char*>(var.c_str()));
  env.push_back(nullptr);
  ::execve(args.front(), args.data(), env.data());
  *exec_failed = true;
  return sysFail("Cannot execute " + argv.front() + " in the jail");
}

}  // namespace hutch::jail

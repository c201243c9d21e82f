#include "agent/files/credentials.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "agent/log.h"

namespace hutch::agent {
namespace {

// The 32-bit-id variants where the architecture has both (i386); x86_64 and arm64 have one.
#ifdef SYS_setfsuid32
constexpr long kSetFsUid = SYS_setfsuid32;
constexpr long kSetFsGid = SYS_setfsgid32;
constexpr long kSetGroups = SYS_setgroups32;
#else
constexpr long kSetFsUid = SYS_setfsuid;
constexpr long kSetFsGid = SYS_setfsgid;
constexpr long kSetGroups = SYS_setgroups;
#endif

// setfsuid and setfsgid report no errors: they return the previous id, and an invalid id
// (-1) changes nothing, which is how the current one is read.
uid_t setFsUid(uid_t uid) {
  return static_cast<uid_t>(::syscall(kSetFsUid, uid));
}
gid_t setFsGid(gid_t gid) {
  return static_cast<gid_t>(::syscall(kSetFsGid, gid));
}

Result<> setThreadGroups(const std::vector<gid_t>& groups) {
  if (::syscall(kSetGroups, groups.size(), groups.data()) != 0) {
    return fail(sysError("Cannot set the supplementary groups", errno));
  }
  return ok();
}

}  // namespace

uid_t currentFsUid() {
  return setFsUid(static_cast<uid_t>(-1));
}

gid_t currentFsGid() {
  return setFsGid(static_cast<gid_t>(-1));
}

ScopedFsCredentials::ScopedFsCredentials(const FsCredentials& who)
    : own_uid_(currentFsUid()), own_gid_(currentFsGid()) {
  if (who.uid == own_uid_ && who.gid == own_gid_) return;  // already that identity
  const int count = ::getgroups(0, nullptr);
  if (count > 0) {
    own_groups_.resize(static_cast<size_t>(count));
    own_groups_.resize(static_cast<size_t>(::getgroups(count, own_groups_.data())));
  }
  // Groups and gid first: once the fsuid is not 0 the thread may lose the right to change them.
  // A refused setgroups (an unprivileged agent) has changed nothing.
  if (auto groups = setThreadGroups(who.groups); !groups) {
    entered_ = fail(Errc::kFailedPrecondition,
                    "The agent cannot act as user " + who.user + " (it is not root)", EPERM);
    return;
  }
  switched_ = true;
  setFsGid(who.gid);
  setFsUid(who.uid);
  if (currentFsGid() != who.gid || currentFsUid() != who.uid) {
    entered_ = fail(Errc::kFailedPrecondition,
                    "The agent cannot act as user " + who.user + " (it is not root)", EPERM);
  }
}

ScopedFsCredentials::~ScopedFsCredentials() {
  restore();
}

void ScopedFsCredentials::restore() {
  if (!switched_) return;
  // The fsuid first: back at 0 the thread has its capabilities to change the rest.
  setFsUid(own_uid_);
  setFsGid(own_gid_);
  auto groups = setThreadGroups(own_groups_);
  if (currentFsUid() != own_uid_ || currentFsGid() != own_gid_ || !groups) {
    // A worker left with a user's identity would do the next user's work with it.
    logError("A file worker could not return to the agent's own identity; stopping");
    std::abort();
  }
}

}  // namespace hutch::agent

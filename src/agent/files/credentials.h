// Per-thread filesystem credentials: the identity a file operation runs as.
//
// The agent is root; a file operation for user U runs on a worker thread that takes U's
// filesystem uid, gid and supplementary groups for the duration of the operation. Only the raw
// syscalls are per-thread (glibc's setgroups and setfs*id wrappers would change every thread of
// the process). Setting a non-zero fsuid also clears CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
// CAP_FOWNER, CAP_CHOWN, CAP_FSETID and the other filesystem capabilities from the thread's
// effective set (capabilities(7)), so permission checks are U's; setting it back to 0 restores
// them.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::agent {

struct FsCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
  std::string user;           // as the request named it (or "root"), for messages

  bool operator==(const FsCredentials&) const = default;
};

// Switches the calling thread to `who` until destroyed, then back to the identity the thread
// had before (the agent's own). Use entered() before doing anything: a switch the kernel refused
// (an unprivileged --listen agent asked for another user) is an error there. Switching to the
// agent's own uid and gid is skipped, so an unprivileged agent can act as itself.
class ScopedFsCredentials {
 public:
  explicit ScopedFsCredentials(const FsCredentials& who);
  ~ScopedFsCredentials();
  ScopedFsCredentials(const ScopedFsCredentials&) = delete;
  ScopedFsCredentials& operator=(const ScopedFsCredentials&) = delete;

  const Result<>& entered() const { return entered_; }

 private:
  void restore();

  bool switched_ = false;
  uid_t own_uid_;
  gid_t own_gid_;
  std::vector<gid_t> own_groups_;
  Result<> entered_;
};

// The calling thread's filesystem uid and gid (for tests and checks).
uid_t currentFsUid();
gid_t currentFsGid();

}  // namespace hutch::agent

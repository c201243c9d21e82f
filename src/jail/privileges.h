// The last steps before exec: resource limits, descriptors, and giving up root for good.
#pragma once

#include <sys/types.h>

#include <vector>

#include "base/result.h"
#include "jail/jail_spec.h"

namespace hutch::jail {

// RLIMIT_CORE 0 (no core file holding guest memory), RLIMIT_NOFILE, RLIMIT_NPROC if asked.
Result<> setResourceLimits(const JailSpec& spec);

// Marks every descriptor above 2 that is not in `keep` close-on-exec.
Result<> closeOtherFds(const std::vector<int>& keep);

// Becomes uid:gid with no supplementary groups and no capabilities in any set (bounding,
// permitted, effective, inheritable, ambient), with securebits locked so that nothing can give
// root its powers back, then sets no_new_privs. Checks the result.
Result<> dropPrivileges(uid_t uid, gid_t gid);

}  // namespace hutch::jail

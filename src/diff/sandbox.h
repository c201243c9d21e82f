// How hutch-diff confines itself before it reads a box's disk (docs/security.md, "hutch diff").
//
// hutchd starts hutch-diff as root. First thing, hutch-diff leaves the host's network (a new,
// empty network namespace), drops every privilege to the box's own uid and gid (the ids its
// QEMU runs as: it can read only what that QEMU can), sets no_new_privs, and caps its resources.
// It then converts the disk chains with qemu-img and replays the ext4 journal with e2fsck, as
// that uid, into its own scratch directory. Once the images are open, and before a single
// directory of the box's filesystem is parsed by libext2fs (which is not hardened against
// hostile metadata), it installs an allow-list seccomp filter: reading and writing descriptors
// it already holds, memory, time, exit. Opening files, executing, sockets and everything else
// fail with EPERM.
#pragma once

#include <sys/types.h>

#include "base/result.h"

namespace hutch::diff {

// Unprivileged from here on: a new network and IPC namespace (when root), no supplementary
// groups, `uid`/`gid` (never 0), no_new_privs, not dumpable, resource limits.
Result<> dropPrivileges(uid_t uid, gid_t gid);

// The allow-list filter (no_new_privs must be set). After it the process can no longer open a
// file or run a program.
Result<> confine();

}  // namespace hutch::diff

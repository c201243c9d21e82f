// The filesystems every box needs, mounted by the agent as PID 1. The initramfs may have mounted
// some already (devtmpfs, /proc): those are left alone.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace hutch::agent {

// Mounts /proc, /sys, /dev (devtmpfs), /dev/pts, /dev/shm, /run (tmpfs), /tmp (tmpfs, only when
// the root filesystem is read-only so /tmp cannot live on disk) and cgroup2 at /sys/fs/cgroup,
// and adds the /dev/fd and /dev/std* links. Failures are logged and skipped: PID 1 goes on.
void mountSystemFilesystems();

// The mount points listed in a /proc/self/mountinfo text (octal escapes decoded).
std::set<std::string> parseMountPoints(std::string_view mountinfo);

}  // namespace hutch::agent

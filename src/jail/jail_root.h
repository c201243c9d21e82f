// The jail's filesystem: an empty tmpfs root holding exactly the listed paths, each bind-mounted
// at its own path (so QEMU's argv needs no rewriting), fresh /dev nodes and a /proc of the
// jail's own PID namespace. Runs in hutch-jail, as root, in a new mount namespace.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"
#include "jail/jail_spec.h"

namespace hutch::jail {

// What every jail shows besides the spec's paths, read-only: the host's /usr (the program, its
// shared libraries, QEMU's modules in /usr/lib/*/qemu and firmware in /usr/share/qemu), the
// /bin /sbin /lib* directories or the symlinks a merged-/usr system has there, the dynamic
// linker's cache and the time zone. /usr is public distribution files; nothing in it is a secret
// and nothing in it can be changed or run set-uid (read-only, nosuid, no_new_privs).
struct SystemPath {
  std::filesystem::path path;
  bool exec = false;
};
const std::vector<SystemPath>& systemPaths();

// Refuses a bind source that the jailed uid (or anyone but root) could swap: every directory
// above the resolved path must be owned by root and not writable by group or others (sticky
// directories such as /tmp are fine). Returns the resolved path.
Result<std::filesystem::path> trustedSource(const std::filesystem::path& path);

// Makes all mounts private, builds the new root and pivots into it. The old root is detached;
// afterwards only the listed paths exist. `gid` owns the non-default device nodes (mode 0660).
Result<> buildRoot(const JailSpec& spec);

}  // namespace hutch::jail

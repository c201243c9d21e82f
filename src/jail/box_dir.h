// Host-side preparation of what a jailed QEMU opens: its box directory and the backing files of
// its disk. Called by hutchd (root) before each launch.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"
#include "jail/box_ids.h"

namespace hutch::jail {

// Gives `dir` and what is in it to the box's uid and gid (mode 0700 on the directory), so the
// jailed QEMU can write its disk overlay, memory file and console log and create its sockets.
// Names in `root_owned` (hutchd's own files: its log, which QEMU gets as an open descriptor, the
// pid file, and the QMP and agent sockets, whose listening descriptors QEMU inherits) are given
// back to root instead. Nothing is followed: a symlink, a hard-linked
// file or a device node in the directory is an error (the box's uid could have planted it to
// make root chown something else). Directories are handled recursively.
// The directory's parents must be root-owned (see trustedSource): /var/lib/hutch/boxes is.
//
// Because the box's uid owns the directory, hutchd must treat its contents as untrusted too:
// open files there with O_NOFOLLOW (qemu.log, console.log, the pid file's temporary), and keep
// frozen layers (snapshots, template disks) outside box directories.
Result<> prepareBoxDir(const std::filesystem::path& dir, BoxIds ids,
                       const std::vector<std::string>& root_owned = {"qemu.log", "qemu.pid",
                                                                     "qmp.sock", "agent.sock"});

// The reverse, once the box's QEMU is gone: `dir` and everything in it back to root (the
// directory 0700), so that a box's uid owns nothing on the host while its VMM does not run (a
// removed box's uid can be handed to a new box) and a finished template VM's directory can be
// bound into other jails (trustedSource wants root-owned directories). What the box's uid may
// have planted and root must not keep (symlinks, FIFOs, device nodes) is deleted; nothing is
// followed.
Result<> reclaimBoxDir(const std::filesystem::path& dir);

// The backing files below a qcow2 image, nearest first (an overlay's base, its base...), made
// absolute. These are the read-only paths the jail must show besides the image itself. A raw
// image or a qcow2 without a backing file gives an empty list. The names come from the images'
// headers, which whoever could write an image chose: see checkBackingFiles before trusting them.
inline constexpr int kMaxBackingChain = 1024;
Result<std::vector<std::filesystem::path>> qcow2BackingChain(const std::filesystem::path& image);

// A box's disk overlay is written by its QEMU, so the backing file named in its header is the
// box's choice: a QEMU that was taken over could name /etc/shadow or another box's disk and have
// hutchd bind it into the next jail, or flatten it into a template. Checks that every file of
// `chain` (resolved, symlinks followed) matches one of `allowed`: fnmatch(3) patterns with
// FNM_PATHNAME, e.g. "/var/lib/hutch/layers/*.qcow2" (escape literal parts with globLiteral).
// Returns the resolved paths.
Result<std::vector<std::filesystem::path>> checkBackingFiles(
    const std::vector<std::filesystem::path>& chain, const std::vector<std::string>& allowed);

// `path` with fnmatch's special characters (* ? [ ] \) escaped.
std::string globLiteral(const std::filesystem::path& path);

}  // namespace hutch::jail

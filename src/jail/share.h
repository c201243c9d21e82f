// A host directory shared into a box (hutch run -v HOSTDIR:BOXDIR): the sharing process,
// virtiofsd, started by hutch-jail in share mode (`hutch-jail --share ...`).
//
// virtiofsd serves the directory to the box's QEMU over a vhost-user socket. It creates files
// with the ids of the guest process that asks (setfsuid), so it must never run as the host's
// root: a box's root would then write root-owned, set-uid files into a host user's directory.
// hutch-jail, as root, in order:
//   1. opens DIR (no symlink followed at its last component) and refuses it unless it is a
//      directory owned by someone other than root: that owner is who the box writes as;
//   2. makes a private mount namespace with a tmpfs on /tmp and binds DIR at kShareMountPoint,
//      nosuid and nodev, read-only when asked, with no mount below it (so the box sees DIR's own
//      filesystem and nothing else), at a path the box's ids may walk (DIR's parents may be
//      closed to them); made by root and then locked by step 3, virtiofsd cannot undo it;
//   3. forks a child into a new user namespace whose only ids are
//        guest root (0)        -> the box's own uid and gid (jail::boxIds): unprivileged
//        guest user (1000)     -> DIR's owner (the user the box's commands run as)
//      (any other guest id is unmapped: it reads what "others" may, and cannot create files);
//   4. the child becomes root of that namespace (so virtiofsd may switch its file ids and build
//      its own sandbox: new mount, pid and net namespaces, pivot_root into DIR, seccomp) and
//      execs virtiofsd (told source=kShareMountPoint); the parent exits once the exec succeeded,
//      leaving no root process.
// Device nodes cannot be made in a user namespace, and virtiofsd never follows a link out of
// DIR (pivot_root): the box reaches nothing outside DIR through the share.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"
#include "jail/box_ids.h"

namespace hutch::jail {

// The guest's unprivileged user (images/base/setup.sh: "hutch", whom commands run as by
// default) is the one who owns the share's files.
inline constexpr uid_t kShareGuestUid = 1000;
inline constexpr gid_t kShareGuestGid = 1000;

// Where the program sees DIR, in the helper's mount namespace.
inline constexpr const char* kShareMountPoint = "/tmp/hutch-share";

struct ShareSpec {
  std::string name;           // the box id, for messages
  std::filesystem::path dir;  // absolute
  bool read_only = false;
  BoxIds box;  // what guest root's files belong to on the host
  bool operator==(const ShareSpec&) const = default;
};

// The user namespace's maps (the contents of /proc/PID/uid_map and gid_map).
std::string shareUidMap(const ShareSpec& spec, uid_t owner_uid);
std::string shareGidMap(const ShareSpec& spec, gid_t owner_gid);

// hutch-jail's command line for a share, and its parsing (the arguments after "--share").
std::vector<std::string> shareCommand(const std::filesystem::path& jail_binary,
                                      const ShareSpec& spec,
                                      const std::vector<std::string>& program);
Result<ShareSpec> parseShareArgs(const std::vector<std::string>& args);

// Why `dir` cannot be shared (not absolute, missing, not a directory, owned by root), or ok.
// hutchd checks with it before it starts a box; the helper checks again, on the descriptor.
Result<> checkShareDir(const std::filesystem::path& dir);

// Steps 1-4 above. Must run as root. Returns once the program runs (the caller exits 0), or the
// reason it could not; `exec_failed` says whether it was the exec itself.
Result<> enterShareAndExec(const ShareSpec& spec, const std::vector<std::string>& argv,
                           bool* exec_failed);

}  // namespace hutch::jail

// Each box's QEMU runs as its own uid and gid, so one box's VMM cannot touch another's files or
// processes even if both escaped their namespaces.
//
// Ids are base + index. hutchd stores the index with the box (SQLite), picks the lowest free one
// with firstFreeIndex(), and frees it when the box is removed.
//
// The default range, 0x7C000000 (2080374784) + 0..65535, is clear of what hosts hand out:
// regular users (1000..60000), systemd's dynamic users (61184..65519) and container ranges
// (nspawn 0x80000..0x6FFFFFFF), /etc/subuid ranges (100000 + 65536 per user), sssd's default
// id mapping (200000..2000200000), systemd's foreign range (0x7FFE0000..) and anything from
// 2^31 on, which some tools treat as negative.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::jail {

inline constexpr uint32_t kDefaultIdBase = 0x7C000000;
inline constexpr uint32_t kMaxBoxIndex = 65535;

struct BoxIds {
  uid_t uid = 0;
  gid_t gid = 0;
  bool operator==(const BoxIds&) const = default;
};

// The ids of the box with `index` (0..kMaxBoxIndex).
Result<BoxIds> boxIds(uint32_t index, uint32_t base = kDefaultIdBase);

// The lowest index not in `used`; kFailedPrecondition when all are taken.
Result<uint32_t> firstFreeIndex(const std::vector<uint32_t>& used);

// Whether any process on the host runs with `uid` as real, effective or saved uid (a scan of
// /proc), zombies aside. hutch-jail refuses to start a box whose uid is still in use.
Result<std::vector<pid_t>> processesWithUid(uid_t uid);

// Whether `pid` is in the caller's user namespace (false if it is gone). A box's shared-folder
// servers (jail/share.h) run with its uid in a user namespace of their own, started just before
// its QEMU; everything else that could have the uid (the QEMU of an earlier box) is in the
// host's.
bool inOwnUserNamespace(pid_t pid);

// Where hutch-jail keeps one lock file per uid (uid-N.lock): host-wide, so that two hutchds
// whose ranges overlap exclude each other too. Emptied by a reboot, like the locks.
inline constexpr std::string_view kUidLockDir = "/run/hutch-jail";

// The id base of a hutchd given none (--uid-base), for its state directory `state_dir`:
// kDefaultIdBase for the default /var/lib/hutch, else one of 500 other ranges, picked by a hash
// of the directory's path: kDefaultIdBase + (513..1012) * 65536, above the ranges that explicit
// --uid-base choices have used (1..512) and below systemd's foreign range. hutchd keeps the one it
// picked in its state directory, so that a box's uid never changes.
uint32_t defaultIdBase(const std::filesystem::path& state_dir);
// The range after `base` among defaultIdBase's 500 (wrapping), for when `base` is taken.
uint32_t nextIdBase(uint32_t base);

// A host-wide lock on the id range starting at `base` (a POSIX record lock on
// <dir>/range-<hex>.lock), held while the descriptor is open: hutchd holds it for its lifetime,
// so that two hutchd never share uids, nor the network namespaces named after the range.
// kFailedPrecondition when another process holds it. The lock is the process's, not the open
// file's: a child hutchd forked is not holding it (flock's would be, from fork to exec, and a
// hutchd restarted the moment its predecessor was killed mid-spawn found its own range taken).
// A process takes a given range's lock once: a second call in it succeeds, and closing that
// second descriptor drops the lock.
Result<UniqueFd> lockIdRange(uint32_t base, const std::filesystem::path& dir = kUidLockDir);
// lockIdRange, for a range this hutchd has never used: refused as well (kFailedPrecondition)
// while a jail still holds the lock of a uid in it: the QEMU of a box of a hutchd that is not
// running (boxes outlive their hutchd by design). Taken, the range's uids would be refused as
// "held by another jail", and its network namespaces, named after the range, removed at start.
Result<UniqueFd> lockUnusedIdRange(uint32_t base, const std::filesystem::path& dir = kUidLockDir);

// The scan above is check-then-act: two jails started at once for one uid could both pass it.
// So hutch-jail first takes this exclusive lock (flock(2) on <dir>/uid-N.lock, made root's and
// 0600) and hands its descriptor to the program: the kernel drops the lock when the last holder,
// the box's VMM, exits. kFailedPrecondition when another process holds it.
Result<UniqueFd> lockUid(uid_t uid, const std::filesystem::path& dir = kUidLockDir);

}  // namespace hutch::jail

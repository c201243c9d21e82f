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
#include <vector>

#include "base/result.h"

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

}  // namespace hutch::jail

// A cgroup per box, on cgroup v1 (one hierarchy per controller) and v2 (one unified tree).
//
// Box cgroups live below the daemon's own cgroup, never elsewhere:
//   v1: <mount of each controller>/<hutchd's path in it>/hutch-boxes/<name>
//   v2: <mount>/<base>/hutch-boxes/<name>, where <base> is hutchd's cgroup. v2 forbids processes
//       in a cgroup that hands controllers to its children, so prepare() moves hutchd (and
//       whatever shares its cgroup) into the leaf <base>/hutch-daemon; a restarted hutchd that
//       finds itself in .../hutch-daemon uses the parent as <base> again.
// hutchd calls CgroupHost::detect() and prepare() once at start, hands boxCgroup(name) to the
// jail in the JailSpec, reads usage() for stats and oomKills() after QEMU died, and remove()s the
// cgroup once QEMU is reaped. hutch-jail does create(), applyLimits() and join().
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::jail {

enum class CgroupVersion { kV1 = 1, kV2 = 2 };

struct CgroupLimits {
  uint64_t memory_max = 0;    // bytes; 0: unlimited. No swap beyond it.
  uint64_t cpu_quota_us = 0;  // CPU time per period; 0: unlimited
  uint64_t cpu_period_us = 100000;
  uint64_t pids_max = 0;  // tasks (processes and threads); 0: unlimited
  // 1..10000 on the v2 scale (default 100); 0: leave. Written to every weight file the kernel
  // offers (ioWeightFiles); where it offers none, applyLimits() says so in a warning.
  uint32_t io_weight = 0;

  // What a VM gets: guest RAM plus the VMM's own memory, `cpus` full CPUs, and room for QEMU's
  // threads (one per vCPU, the main loop, RCU and up to 64 I/O workers).
  static CgroupLimits forVm(unsigned cpus, uint64_t guest_memory_mib, uint64_t vmm_overhead_mib);
  bool operator==(const CgroupLimits&) const = default;
};

// QEMU's memory besides guest RAM: measured ~100 MiB for a microvm, rounded up, plus the TCG
// translation cache (tb-size) when the VM runs under TCG.
inline constexpr uint64_t kVmmOverheadMib = 256;

// One directory of a box's cgroup: v1 has one per hierarchy, v2 exactly one.
struct CgroupDir {
  std::string controllers;  // v1: the hierarchy's controllers ("memory", "cpu,cpuacct"); v2: ""
  std::filesystem::path path;
  bool operator==(const CgroupDir&) const = default;
};

// The io weight files a cgroup may have, in the order they are written: v2 io.weight (the io
// controller's own, "default N") and io.bfq.weight (the bfq scheduler's, 1..1000); v1
// blkio.weight (CFQ's, 10..1000, gone since Linux 5.0) and blkio.bfq.weight (bfq's, 1..1000).
// Each is present only where the kernel offers that mechanism.
const std::vector<std::string>& ioWeightFiles(CgroupVersion version);

// What applyLimits() did.
struct AppliedLimits {
  std::vector<std::string> written;   // "file=value" for each control file written, in order
  std::vector<std::string> warnings;  // what this kernel or hierarchy does not offer
  bool operator==(const AppliedLimits&) const = default;
};

struct CgroupUsage {
  uint64_t memory_current = 0;  // bytes
  uint64_t memory_peak = 0;     // bytes; 0 when the kernel does not say (v2 before 5.19)
  uint64_t memory_max = 0;      // bytes; 0: unlimited
  uint64_t cpu_usage_ns = 0;
  uint64_t pids_current = 0;
  uint64_t pids_max = 0;   // 0: unlimited
  uint64_t oom_kills = 0;  // processes the OOM killer killed in this cgroup
  // The io weight in each weight file the cgroup has (ioWeightFiles), as the kernel shows it;
  // empty: no weight applies to this box.
  std::map<std::string, uint64_t> io_weights;
  bool operator==(const CgroupUsage&) const = default;
};

// "QEMU was killed by the OOM killer (memory.max 600 MiB)", or nullopt when no OOM kill happened.
// hutchd uses it as the box's failure reason when QEMU died of SIGKILL.
std::optional<std::string> oomKillReason(const CgroupUsage& usage, std::string_view program);

// A box's cgroup: where it is. The operations touch the filesystem; they work on any directory
// tree that has the cgroup files, which is how the v2 code is tested on this v1 host.
struct BoxCgroup {
  CgroupVersion version = CgroupVersion::kV2;
  std::vector<CgroupDir> dirs;

  // The directory holding `controller` ("memory", "cpu", "cpuacct", "pids", "blkio"/"io").
  std::optional<std::filesystem::path> dirFor(std::string_view controller) const;

  // Makes the directories. A leftover from an earlier run is removed first if it is empty
  // (its counters, such as oom_kill, must not carry over); one with processes is an error.
  Result<> create() const;
  // Writes the limits. memory, cpu and pids are required (missing controller: an error that says
  // how to delegate it); the io weight goes to every weight file that exists, and a warning says
  // so when none does. Returns what was written and what was skipped.
  Result<AppliedLimits> applyLimits(const CgroupLimits& limits) const;
  // Moves the calling process into the cgroup (every hierarchy).
  Result<> join() const;
  Result<CgroupUsage> usage() const;
  // The pids in the cgroup (empty once everything in it exited).
  Result<std::vector<pid_t>> pids() const;
  // Whether process `pid` (of the caller's PID namespace) is in this cgroup in every hierarchy:
  // the kernel's word, which a process cannot change without write access to cgroup.procs.
  Result<bool> holds(pid_t pid) const;
  // Removes the directories once the processes are gone (waits up to ~1 s for the kernel to let
  // go of exiting tasks). Missing directories are fine.
  Result<> remove() const;

  bool operator==(const BoxCgroup&) const = default;
};

// A cgroup hierarchy as mounted (/proc/self/mountinfo).
struct CgroupMount {
  CgroupVersion version = CgroupVersion::kV2;
  std::filesystem::path mount_point;
  std::string root;                      // the hierarchy path the mount shows ("/" usually)
  std::vector<std::string> controllers;  // v1 only: from the super options
  bool operator==(const CgroupMount&) const = default;
};

// A line of /proc/self/cgroup: "4:memory:/system.slice/hutchd.service", "0::/user.slice".
struct ProcCgroup {
  int hierarchy = 0;
  std::vector<std::string> controllers;  // empty for v2 and for named hierarchies
  std::string path;
  bool operator==(const ProcCgroup&) const = default;
};

std::vector<CgroupMount> parseCgroupMounts(std::string_view mountinfo);
Result<std::vector<ProcCgroup>> parseProcCgroup(std::string_view text);

inline constexpr std::string_view kBoxesCgroup = "hutch-boxes";
inline constexpr std::string_view kDaemonLeafCgroup = "hutch-daemon";

class CgroupHost {
 public:
  // From this process's /proc/self/cgroup and /proc/self/mountinfo. `parent` (hutchd
  // --cgroup-parent): "" puts boxes below the daemon's own cgroup (BASE/hutch-boxes/ID); an
  // absolute hierarchy path ("/hutch") puts them there instead (PARENT/ID), outside the daemon's
  // cgroup, in every hierarchy. A service manager starts the daemon's next process in the
  // daemon's cgroup, which cgroup v2 refuses once controllers are enabled below it (systemd
  // before 254 fails the unit's restart with 219/CGROUP while boxes run): the unit passes one.
  static Result<CgroupHost> detect(std::string_view parent = {});
  static Result<CgroupHost> fromText(std::string_view proc_self_cgroup, std::string_view mountinfo,
                                     std::string_view parent = {});

  CgroupVersion version() const { return version_; }
  // The directory of the daemon's own cgroup, per hierarchy (v2: one).
  const std::vector<CgroupDir>& baseDirs() const { return base_; }
  // The directory box cgroups are made in, per hierarchy.
  const std::vector<CgroupDir>& boxesDirs() const { return boxes_; }
  // Once at daemon start, as root: creates the boxes' directory in each hierarchy and, on v2,
  // enables the controllers down to it (below the daemon's cgroup: moving the daemon into its
  // leaf first, as v2 requires). Returns warnings (a controller the host does not give us).
  Result<std::vector<std::string>> prepare() const;
  // Where box `name` (a box id; [A-Za-z0-9._-]) lives. Nothing is created.
  Result<BoxCgroup> boxCgroup(std::string_view name) const;
  // With a parent: where an earlier hutchd without one put box `name` (below its own cgroup),
  // for adopting and removing the boxes it left; nullopt without a parent.
  std::optional<BoxCgroup> legacyBoxCgroup(std::string_view name) const;

 private:
  Result<std::vector<std::string>> prepareV2Parent(const std::vector<std::string>& enable) const;

  CgroupVersion version_ = CgroupVersion::kV2;
  std::vector<CgroupDir> base_;
  std::vector<CgroupDir> boxes_;
  std::filesystem::path v2_root_;  // v2 with a parent: the hierarchy's mount point
};

}  // namespace hutch::jail

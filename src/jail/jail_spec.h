// What a jailed process may see and use: a plain value, sent to hutch-jail as JSON.
//
// hutchd fills a JailSpec for each box and starts `hutch-jail --spec-fd 3 -- qemu-system-...`
// (see jailCommand). hutch-jail does everything that needs root (cgroup, namespaces, mounts,
// devices), drops to the box's uid and gid, and execs the program in its own process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "jail/cgroup.h"

namespace hutch::jail {

// A host path made visible inside the jail at the same path.
struct BindPath {
  enum class Access { kReadOnly, kReadWrite };
  std::filesystem::path path;  // absolute; symlinks in it are followed on the host
  Access access = Access::kReadOnly;
  bool exec = false;  // allow executing files from it (the program itself; never a box dir)
  bool operator==(const BindPath&) const = default;
};

struct JailSpec {
  std::string name;  // the box id: for messages and the default hostname
  uid_t uid = 0;     // the box's own ids (boxIds()); never 0
  gid_t gid = 0;
  std::string hostname;       // empty: "hutch-<name>"
  std::filesystem::path cwd;  // working directory inside the jail; empty: "/"
  // What the jail shows besides the system files (systemPaths()): box dir read-write,
  // template files read-only, the program when it is not under /usr.
  std::vector<BindPath> paths;
  // Device nodes besides the defaults (defaultDevices()): "/dev/kvm", later "/dev/net/tun".
  std::vector<std::filesystem::path> devices;
  // A network namespace to join (/run/netns/NAME). nullopt: a new, empty one (loopback only).
  std::optional<std::filesystem::path> netns;
  // The box's cgroup and its limits. validate() refuses a spec without a cgroup unless
  // allow_no_cgroup is set (tests only: hutchd always sets one).
  std::optional<BoxCgroup> cgroup;
  bool allow_no_cgroup = false;
  CgroupLimits limits;
  uint64_t max_open_files = 4096;  // RLIMIT_NOFILE
  uint64_t max_processes = 0;      // RLIMIT_NPROC for the box's uid; 0: leave as is
  bool seccomp = true;             // hutch's own filter (seccompFilter.h), on top of QEMU's
  // Socket address families the program may create (seccomp): "unix", "inet", "inet6",
  // "netlink". QEMU driving a box needs only unix sockets (QMP, agent).
  std::vector<std::string> socket_families = {"unix"};
  // Tests only: mount /proc as on kernels before 5.8, which lack subset=pid (jail_root.h), so
  // that fallback is tested where the kernel has subset=pid.
  bool legacy_proc = false;
  std::vector<std::string> env;  // the program's whole environment ("KEY=VALUE")
  std::vector<int> keep_fds;     // descriptors (besides 0, 1, 2) the program inherits

  // Checks what can be checked without touching the host: ids, absolute paths, families, a
  // cgroup.
  Result<> validate() const;
  bool operator==(const JailSpec&) const = default;
};

// The device nodes every jail gets: /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom.
const std::vector<std::filesystem::path>& defaultDevices();

// JSON, as hutch-jail reads it. Unknown keys are errors, so a typo never weakens a jail.
std::string toJson(const JailSpec& spec);
Result<JailSpec> parseJailSpec(std::string_view json);

// A sealed memfd holding toJson(spec), positioned at 0: map it into the child with the spawn
// keep-list (e.g. as fd 3) and pass `--spec-fd 3`. Nothing is written to the box directory.
Result<UniqueFd> specMemfd(const JailSpec& spec);

// argv for sys::spawn: {jail_binary, "--spec-fd", N, "--", program...}.
std::vector<std::string> jailCommand(const std::filesystem::path& jail_binary, int spec_fd,
                                     const std::vector<std::string>& program);

}  // namespace hutch::jail

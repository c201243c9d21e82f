// The QEMU backend: one qemu-system-x86_64 process per VM, `-M microvm`, driven through QMP.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "jail/box_ids.h"
#include "jail/cgroup.h"
#include "jail/jail_spec.h"
#include "vmm/backend.h"
#include "vmm/qemu/qemu_vm.h"

namespace hutch::vmm::qemu {

// Jailing (docs/security.md): each QEMU is started through hutch-jail as PID 1 of a new PID
// namespace, as the VM's own uid (VmSpec::uid_index), in its own cgroup below `cgroups`, seeing
// only its run directory, its kernel, initrd and disk layers, and its memory file.
struct QemuJailOptions {
  std::filesystem::path helper;  // the hutch-jail binary
  // hutch-ram-preload.so (ram_preload.cc), for VMs that map a read-only memory file; empty:
  // beside the helper.
  std::filesystem::path ram_preload;
  jail::CgroupHost cgroups;  // detected and prepared by the daemon
  // VM uids and gids are id_base + VmSpec::uid_index (jail::boxIds). One hutchd per host uses
  // the default; test daemons sharing a host take ranges of their own.
  uint32_t id_base = jail::kDefaultIdBase;
  // The server of shared directories (VmSpec::shares): QEMU's own C virtiofsd, packaged with
  // it in Debian 12 (qemu-system-common).
  std::filesystem::path virtiofsd = "/usr/lib/qemu/virtiofsd";
};

struct QemuBackendOptions {
  // Whether launch may use -accel kvm; nullopt: probe this host (a usable /dev/kvm).
  std::optional<bool> kvm_usable;
  // QEMU start → QMP answered and the guest running; past it the launch fails.
  std::chrono::milliseconds start_timeout{10000};
  QemuVmOptions vm;
  // nullopt: QEMU runs as hutchd's own user, unjailed (hutchd --no-jail; tests).
  std::optional<QemuJailOptions> jail;
};

class QemuBackend : public VmBackend {
 public:
  // `qemu_binary`: a name looked up in PATH, or a path. A missing binary is reported by
  // launch(); check findExecutable() first to report it at startup. VMs are watched on
  // `executor` (the daemon's event loop).
  QemuBackend(asio::any_io_executor executor,
              std::filesystem::path qemu_binary = "qemu-system-x86_64",
              QemuBackendOptions options = {});

  std::string name() const override { return "qemu"; }
  Capabilities capabilities() const override;

  // Validates the spec, starts QEMU in its own session (it outlives hutchd), stdin /dev/null,
  // stdout and stderr appended to spec.vmmLog(), no other descriptors; writes
  // <run_dir>/qemu.pid; connects QMP and checks the guest is running. On failure no QEMU is
  // left behind and the error carries the end of qemu.log. Jailed (options.jail), QEMU is
  // exec'd by hutch-jail in the same process: the pid is still QEMU's.
  asio::awaitable<Result<std::unique_ptr<Vm>>> launch(const VmSpec& spec) override;

  // The QEMU of an earlier hutchd: reads <run_dir>/qemu.pid, checks that the process is a QEMU
  // with this run_dir's QMP socket, watches it through a pidfd and reconnects QMP. The exit
  // status of an adopted process is unknown (it is not our child). Jailed, the process must also
  // run as the run dir's owner and sit in the run dir's cgroup (adoptedJail): its command line
  // is its own to rewrite, so it says nothing about which box it is.
  asio::awaitable<Result<std::unique_ptr<Vm>>> adopt(std::filesystem::path run_dir) override;
  // Every QEMU process on the host whose run dir (qemuRunDir) is below `root`, not in `keep`.
  void releaseRunDir(const std::filesystem::path& run_dir) override;
  std::vector<std::filesystem::path> killStrays(
      const std::filesystem::path& root, const std::set<std::filesystem::path>& keep) override;

  // launch() with the concrete type, for QEMU-specific callers (snapshots, tests).
  asio::awaitable<Result<std::unique_ptr<QemuVm>>> launchQemu(const VmSpec& spec);
  asio::awaitable<Result<std::unique_ptr<QemuVm>>> adoptQemu(std::filesystem::path run_dir);

  const std::filesystem::path& binary() const { return binary_; }
  bool jailed() const { return options_.jail.has_value(); }

 private:
  struct Started {
    pid_t pid;
    UniqueFd pidfd;
    std::optional<VmJail> jail;
    // Connected to the listening sockets QEMU inherited before it started: its answers wait
    // there until QEMU accepts, and a QEMU that dies first closes them.
    UniqueFd qmp;
    UniqueFd agent;
  };
  // Validates, spawns QEMU and records its pid; kills it again if a later step fails.
  Result<Started> startProcess(const VmSpec& spec) const;
  asio::awaitable<Result<std::shared_ptr<QmpClient>>> connectQmp(QemuVm& vm,
                                                                 std::filesystem::path socket,
                                                                 std::chrono::milliseconds timeout);

  asio::any_io_executor executor_;
  std::filesystem::path binary_;
  QemuBackendOptions options_;
  bool kvm_usable_;
  bool pvm_host_;  // the -cpu model of KVM VMs (QemuArgv::forSpec)
};

// The JailSpec hutchd hands hutch-jail for `spec`, run as `ids` by `qemu_binary`: the paths
// QEMU opens (jailPathsFor, the disk's checked backing chain), /dev/kvm for KVM, the cgroup of
// the run dir (vmCgroupName) and its limits.
Result<jail::JailSpec> jailSpecFor(const VmSpec& spec, jail::BoxIds ids,
                                   const QemuJailOptions& options,
                                   const std::filesystem::path& qemu_binary);

// A VM's cgroup is named after its run directory (boxes/<id>: the box id), so that hutchd finds
// it again from its own records after a restart, never from what the VMM says.
std::string vmCgroupName(const std::filesystem::path& run_dir);

// Whether the running process `pid` is the jailed QEMU of `run_dir`, judged by what the kernel
// says and the VMM cannot change: its real, effective, saved and filesystem uids and gids are the
// owner of run_dir (prepareBoxDir gave it to the box's ids; only root can change that), and it is
// in the run dir's cgroup below `cgroups` in every hierarchy. Returns the jail to watch it with;
// kFailedPrecondition saying which fact is wrong; nullopt for a run dir that is root's (a QEMU
// an unjailed hutchd started).
Result<std::optional<VmJail>> adoptedJail(const std::filesystem::path& run_dir, pid_t pid,
                                          const jail::CgroupHost& cgroups);

// The JailSpec paths of a VM: what its QEMU opens by name. Pure: the backing chain is given.
std::vector<jail::BindPath> jailPathsFor(const VmSpec& spec, const std::filesystem::path& binary,
                                         const std::vector<std::filesystem::path>& backing,
                                         const std::filesystem::path& ram_preload);

// The run dir of a QEMU that hutchd started, read from its command line (/proc/PID/cmdline):
// the directory of its console log (or, for QEMUs an older hutchd started, of its QMP socket).
// Empty if `cmdline` is not such a QEMU.
std::filesystem::path qemuRunDir(const std::vector<std::string>& cmdline);

// Whether `cmdline` (from /proc/PID/cmdline) is a QEMU serving the QMP socket of `run_dir`.
bool isQemuForRunDir(const std::vector<std::string>& cmdline, const std::filesystem::path& run_dir);

// The pid in <run_dir>/qemu.pid if that process is our QEMU for run_dir, else kNotFound.
Result<pid_t> findRunningQemu(const std::filesystem::path& run_dir);

// "7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)" from `qemu-system-x86_64 --version`: snapshots
// record it, because device state is only guaranteed to load into the same QEMU build.
Result<std::string> qemuVersion(const std::filesystem::path& binary);

// Whether `model` ("max", "Haswell,-hle": a model and its flags) names a CPU model in
// `cpu_help`, the output of `qemu-system-x86_64 -cpu help`; kInvalidArgument saying how to list
// them when not. Checked when hutchd starts, so a typo is not found by the first box's QEMU.
Result<> checkCpuModel(std::string_view model, std::string_view cpu_help);

}  // namespace hutch::vmm::qemu

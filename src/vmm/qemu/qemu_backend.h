// The QEMU backend: one qemu-system-x86_64 process per VM, `-M microvm`, driven through QMP.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vmm/backend.h"
#include "vmm/qemu/qemu_vm.h"

namespace hutch::vmm::qemu {

struct QemuBackendOptions {
  // Whether launch may use -accel kvm; nullopt: probe this host (a usable /dev/kvm).
  std::optional<bool> kvm_usable;
  // QEMU start → QMP answered and the guest running; past it the launch fails.
  std::chrono::milliseconds start_timeout{10000};
  QemuVmOptions vm;
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
  // left behind and the error carries the end of qemu.log.
  asio::awaitable<Result<std::unique_ptr<Vm>>> launch(const VmSpec& spec) override;

  // The QEMU of an earlier hutchd: reads <run_dir>/qemu.pid, checks that the process is a QEMU
  // with this run_dir's QMP socket, watches it through a pidfd and reconnects QMP. The exit
  // status of an adopted process is unknown (it is not our child).
  asio::awaitable<Result<std::unique_ptr<Vm>>> adopt(std::filesystem::path run_dir) override;

  // launch() with the concrete type, for QEMU-specific callers (snapshots, tests).
  asio::awaitable<Result<std::unique_ptr<QemuVm>>> launchQemu(const VmSpec& spec);
  asio::awaitable<Result<std::unique_ptr<QemuVm>>> adoptQemu(std::filesystem::path run_dir);

  const std::filesystem::path& binary() const { return binary_; }

 private:
  struct Started {
    pid_t pid;
    UniqueFd pidfd;
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
};

// Whether `cmdline` (from /proc/PID/cmdline) is a QEMU serving the QMP socket of `run_dir`.
bool isQemuForRunDir(const std::vector<std::string>& cmdline, const std::filesystem::path& run_dir);

// The pid in <run_dir>/qemu.pid if that process is our QEMU for run_dir, else kNotFound.
Result<pid_t> findRunningQemu(const std::filesystem::path& run_dir);

// "7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)" from `qemu-system-x86_64 --version`: snapshots
// record it, because device state is only guaranteed to load into the same QEMU build.
Result<std::string> qemuVersion(const std::filesystem::path& binary);

}  // namespace hutch::vmm::qemu

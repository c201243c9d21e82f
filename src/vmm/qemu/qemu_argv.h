// The QEMU command line as typed parts. Each part renders its own arguments; QemuArgv puts them
// together for a VmSpec. Nothing here starts a process, so it is all tested on the rendered argv.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vmm/vm_spec.h"

namespace hutch::vmm::qemu {

using Argv = std::vector<std::string>;

// QEMU option values are comma-separated: a literal comma is written twice.
std::string escapeOptionValue(std::string_view value);

// -name, and the switches that keep QEMU from adding anything we did not ask for.
struct GeneralOptions {
  std::string name;
  void appendTo(Argv& argv) const;
};

// -machine microvm,memory-backend=<id>[,...]. ACPI stays on: the guest kernel finds microvm's
// virtio-mmio devices through it.
struct MachineOption {
  std::string type = "microvm";
  std::string memory_backend;                     // id of a MemoryBackendFile; empty: anonymous RAM
  std::map<std::string, std::string> properties;  // extra machine properties, e.g. rtc=off
  void appendTo(Argv& argv) const;
};

// -accel kvm | -accel tcg,tb-size=N (the default 1 GiB translation cache bloats RSS).
struct AccelOption {
  Accel accel = Accel::kTcg;
  uint64_t tcg_tb_size_mib = 256;  // 0: QEMU's default
  void appendTo(Argv& argv) const;
};

// -cpu <model> (omitted when empty: TCG's default model boots faster than "max"; VmSpec's
// tcg_cpu_model picks another for software that needs newer instructions) and -smp N.
// KVM uses the host's model; on a PVM /dev/kvm (HostProbe::isPvm) QEMU 7.2 aborts at vCPU reset
// with it ("failed to set MSR 0x10a": PVM refuses IA32_ARCH_CAPABILITIES), so there the model
// leaves that MSR out.
inline constexpr std::string_view kKvmCpuModel = "host";
inline constexpr std::string_view kPvmCpuModel = "host,-arch-capabilities";
struct CpuOption {
  std::string model;
  unsigned count = 1;
  void appendTo(Argv& argv) const;
};

// -m N -object memory-backend-file,... (guest RAM in a file, so a snapshot maps it back) or
// memory-backend-ram when mem_path is empty. The id names the RAM block in migration streams:
// a snapshot restores only into a VM whose backend has the same id.
struct MemoryBackendFile {
  std::string id = "mem";
  uint64_t size_mib = 512;
  std::filesystem::path mem_path;  // empty: anonymous memory-backend-ram (or -memfd, see below)
  bool share = true;  // writes reach the file (snapshot source); false: private copy-on-write
  // With no mem_path: memory-backend-memfd,share=on instead of -ram, so a vhost-user device's
  // server (virtiofsd) can map the guest's RAM.
  bool memfd = false;
  void appendTo(Argv& argv) const;
};

// -S -incoming defer: wait, paused, for migrate-incoming (a snapshot restore).
struct IncomingMigration {
  void appendTo(Argv& argv) const;
};

// The guest kernel command line.
struct KernelCmdline {
  std::vector<std::string> params;
  // console=ttyS0 root=/dev/vda rw quiet panic=-1 tsc=reliable [tsc_early_khz=K] hutch.K=V...
  static KernelCmdline forGuest(uint64_t tsc_khz,
                                const std::map<std::string, std::string>& guest_params);
  std::string render() const;
  bool operator==(const KernelCmdline&) const = default;
};

// -kernel, -initrd, -append.
struct DirectKernelBoot {
  std::filesystem::path kernel;
  std::filesystem::path initrd;  // empty: none
  KernelCmdline cmdline;
  void appendTo(Argv& argv) const;
};

// -drive id=<id>,file=...,format=...,if=none -device virtio-blk-device,drive=<id>.
struct VirtioBlockDevice {
  std::string id = "root";
  std::filesystem::path file;
  std::string format = "qcow2";
  bool read_only = false;
  void appendTo(Argv& argv) const;
};

// -device virtio-serial-device -chardev socket,...,server=on,wait=off
// -device virtserialport,chardev=<id>,name=<port name>: the guest agent's channel. With
// `listen_fd` QEMU serves a listening socket it inherits (socket,fd=N) instead of binding
// `socket` itself, so the host can connect before QEMU runs.
struct VirtioSerialPort {
  std::string chardev_id = "agent";
  std::filesystem::path socket;
  std::optional<int> listen_fd;
  std::string port_name = "hutch.agent";
  void appendTo(Argv& argv) const;
};

// -netdev tap,id=net0,fd=N -device virtio-net-device,netdev=net0,mac=M: the NIC, on a tap
// descriptor QEMU inherits as fd N (the backend opened it in the box's network namespace).
struct VirtioNetTap {
  int fd = 4;
  std::string mac;
  void appendTo(Argv& argv) const;
};

// -object rng-random,id=rng0,filename=/dev/urandom -device virtio-rng-device,rng=rng0: without
// it the guest's RNG is not ready when the agent starts and the first su/sudo can stall.
struct VirtioRng {
  void appendTo(Argv& argv) const;
};

// -device virtio-balloon-device,free-page-reporting=on: the guest reports the free pages it
// has (2 MiB blocks, a few seconds after they are freed) and QEMU discards them, so memory a
// workload freed goes back to the host. The balloon is never inflated.
struct VirtioBalloon {
  void appendTo(Argv& argv) const;
};

// -chardev socket,id=share<i>,fd=N -device vhost-user-fs-device,chardev=share<i>,tag=TAG: a
// shared directory, served by virtiofsd on the other end of the connected socket N.
struct VhostUserFs {
  std::string chardev_id;
  int fd = -1;
  std::string tag;
  void appendTo(Argv& argv) const;
};

// -chardev file,id=console,path=...,append=on -serial chardev:console: the guest's ttyS0,
// appended to a log file so a restart does not erase the previous boot.
struct SerialConsoleLog {
  std::filesystem::path log;
  void appendTo(Argv& argv) const;
};

// -qmp unix:<path>,server=on,wait=off; with `listen_fd`, -chardev socket,id=qmp,fd=N,...
// -mon chardev=qmp,mode=control: QMP on a listening socket QEMU inherits.
struct QmpSocket {
  std::filesystem::path socket;
  std::optional<int> listen_fd;
  void appendTo(Argv& argv) const;
};

// -sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny: QEMU's own
// seccomp filter, installed after QEMU set itself up. No fork or exec (nothing can be started
// from a taken-over QEMU), no set*id, no scheduler or NUMA policy changes, no obsolete
// syscalls. It sits on top of hutch-jail's filter (docs/security.md).
struct SandboxOption {
  void appendTo(Argv& argv) const;
};

// The whole command line.
struct QemuArgv {
  std::filesystem::path binary = "qemu-system-x86_64";
  GeneralOptions general;
  MachineOption machine;
  AccelOption accel;
  CpuOption cpu;
  std::optional<MemoryBackendFile> memory;
  DirectKernelBoot boot;
  std::vector<VirtioBlockDevice> disks;
  std::optional<VirtioSerialPort> agent;
  std::optional<VirtioNetTap> nic;
  std::optional<VirtioRng> rng;
  std::optional<VirtioBalloon> balloon;
  std::vector<VhostUserFs> shares;
  std::optional<SerialConsoleLog> console;
  QmpSocket qmp;
  std::optional<IncomingMigration> incoming;
  std::optional<SandboxOption> sandbox;
  Argv extra;  // appended verbatim (tests, experiments)

  // The descriptor numbers the NIC's tap and the listening QMP and agent sockets are passed as.
  static constexpr int kTapFd = 4;
  static constexpr int kQmpFd = 5;
  static constexpr int kAgentFd = 6;
  // Share i's vhost-user socket is descriptor kShareFd + i.
  static constexpr int kShareFd = 10;
  // The command line hutch uses for `spec` (which should be valid); `pvm_host`: this host's
  // /dev/kvm is PVM (the CPU model above).
  static QemuArgv forSpec(const VmSpec& spec, std::filesystem::path binary, bool pvm_host = false);
  Argv render() const;
};

}  // namespace hutch::vmm::qemu

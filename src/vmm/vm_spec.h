// What a VM is made of: a plain value, validated before launch, rendered by each backend.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::vmm {

enum class Accel { kKvm, kTcg };
std::string_view accelName(Accel accel);
Result<Accel> parseAccel(std::string_view text);  // "kvm" | "tcg"

// Where guest RAM lives.
//   kPrivate:    anonymous memory (an ordinary box; a capture carries its RAM in the state file).
//   kSharedFile: memory_file, writes reach it (a template VM: its snapshot keeps the file and the
//                state file skips the RAM, the migration capability x-ignore-shared).
//   kMappedFile: memory_file is a frozen snapshot's RAM, mapped copy-on-write, so every box
//                restored from one snapshot shares its unchanged pages.
enum class GuestRam { kPrivate, kSharedFile, kMappedFile };
std::string_view guestRamName(GuestRam ram);

// A host directory shared into the VM (virtio-fs): a vhost-user-fs device whose server, virtiofsd,
// the backend starts jailed (jail/share.h). The guest mounts it by its tag. QEMU 7.2 cannot
// migrate a vhost-user-fs device, so a VM with shares boots cold and is never captured.
struct VmShare {
  std::string tag;  // what the guest mounts (mount -t virtiofs TAG DIR): 1-36 bytes
  std::filesystem::path host_dir;
  bool read_only = false;
  bool operator==(const VmShare&) const = default;
};

// A -cpu value is one argument of a model and its flags: letters, digits and -_.,+= only.
Result<> checkCpuModelText(std::string_view model);

struct VmSpec {
  std::string id;  // box id, used for QEMU's -name and logs
  unsigned cpus = 1;
  uint64_t memory_mib = 512;
  Accel accel = Accel::kTcg;
  // The emulated CPU under TCG: a QEMU -cpu model with its flags ("max", "Haswell,-hle"); empty
  // for QEMU's default (qemu64, which boots fastest). Ignored under KVM, where the guest sees the
  // host's CPU. Part of the device model: a snapshot restores only into a VM with the same.
  std::string tcg_cpu_model;
  uint64_t tsc_khz = 0;          // host TSC frequency; 0 = unknown (flag omitted)
  std::filesystem::path kernel;  // uncompressed vmlinux (PVH entry)
  std::filesystem::path initrd;  // empty: no initrd
  std::filesystem::path disk;    // the box's writable disk (qcow2 overlay)
  std::string disk_format = "qcow2";
  std::map<std::string, std::string> guest_params;  // rendered as hutch.KEY=VALUE on the cmdline
  GuestRam ram = GuestRam::kPrivate;
  std::filesystem::path memory_file;  // kSharedFile, kMappedFile
  // A virtio balloon whose free page reporting gives the host back the pages the guest frees.
  // Part of the device model: a snapshot restores only into a VM with the same setting.
  bool free_page_reporting = false;
  // Restore instead of boot: QEMU starts waiting for a migration stream (-incoming defer) and
  // loads this state file; launch() returns with the VM paused, ready to resume().
  std::filesystem::path incoming_state;
  // Restore from a state not written yet: launch() returns with QEMU waiting for it, and the
  // caller hands it over with Vm::loadState() once it exists (a fork starts its children while
  // the parent's state is still being saved). Ignored when incoming_state is set.
  bool incoming_later = false;
  std::filesystem::path run_dir;  // box directory: sockets, logs, pid file live here
  // The VM's NIC: a virtio-net device on the tap device `tap` in this network namespace (the
  // backend opens it and hands QEMU the descriptor; QEMU itself stays out of the namespace).
  // Empty: no NIC.
  std::filesystem::path netns;
  std::string tap = "tap0";
  std::string mac = "52:54:00:12:34:56";
  // Shared host directories (needs GuestRam::kPrivate, no restore, and a jailing backend).
  std::vector<VmShare> shares;
  // A jailing backend runs the VMM as its own uid and gid, derived from this index (hutchd
  // stores one per box; jail::boxIds). Required when the backend jails.
  std::optional<uint32_t> uid_index;
  // Where the disk's backing files may be: fnmatch(3) patterns (FNM_PATHNAME) that every file of
  // the disk's backing chain, resolved, must match before a jailing backend shows it to the VMM
  // (the chain is read from image headers a VMM may have written). Empty: no backing file.
  std::vector<std::string> backing_files;
  // Derived paths inside run_dir.
  std::filesystem::path qmpSocket() const { return run_dir / "qmp.sock"; }
  std::filesystem::path agentSocket() const { return run_dir / "agent.sock"; }
  std::filesystem::path consoleLog() const { return run_dir / "console.log"; }
  std::filesystem::path vmmLog() const { return run_dir / "qemu.log"; }

  // Checks ranges, ids, guest parameters, that the files and run_dir exist and that socket
  // paths fit a sockaddr_un. Errors say what to fix.
  Result<> validate() const;
  bool operator==(const VmSpec&) const = default;
};

}  // namespace hutch::vmm

// Snapshots as values: what the store records, the manifest written beside the files, the
// compatibility rule that decides whether a snapshot may be restored on this host, and the
// qcow2 backing chains that keep disk layers alive.
//
// A snapshot directory (<state>/snapshots/<id>/) holds:
//   manifest.json  what made it (format, QEMU version, acceleration, CPU, template build...)
//   state          QEMU's device state (+ the guest RAM when "ram" is "stream")
//   memory         the frozen guest RAM when "ram" is "file" (template snapshots)
// and names a frozen qcow2 disk layer (under <state>/layers/, or layer.qcow2 in the directory).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::box {

// kSaved: a running box captured like a checkpoint, but kept after the box is removed and owned
// by the box's owner; new boxes start from it (BoxService::createFromSaved). E2B's snapshots.
// kSuspend: a suspended box's memory and devices (its disk is its own, not frozen); one per
// box, dropped when it resumes (box_suspend.cc).
enum class SnapshotKind { kTemplate, kCheckpoint, kFork, kSaved, kSuspend };
std::string_view snapshotKindName(SnapshotKind kind);
Result<SnapshotKind> parseSnapshotKind(std::string_view text);

struct Snapshot {
  std::string id;  // 12 hex digits
  SnapshotKind kind = SnapshotKind::kCheckpoint;
  std::string box_id;        // checkpoint: its box; fork, saved: the box captured; template: empty
  std::string name;          // checkpoint name, unique per box; saved: unique per owner
  std::string template_key;  // template snapshots: what they were made for (templateSnapshotKey)
  std::filesystem::path dir;
  std::filesystem::path layer;  // the frozen disk layer
  uint64_t size_bytes = 0;      // state + memory + layer, when made
  int64_t created_at = 0;
  std::string owner_id;  // saved: the owner of the box captured (Owner::id)
  // saved: the captured box's record as JSON (savedSourceJson): what a box made from it starts
  // with, since the box itself may be gone.
  std::string source;
  bool operator==(const Snapshot&) const = default;
};

// The facts of this host that a snapshot must match to be restored.
struct SnapshotEnv {
  std::string qemu_version;  // "7.2.22"
  std::string accel;         // "tcg" | "kvm"
  std::string cpu_model;     // the host CPU ("model name" in /proc/cpuinfo)
  // The VM's NIC, as a restore must find it again: "none", or the device and the guest's
  // address ("virtio-net 10.0.2.15/24"), the same in every box.
  std::string network = "none";
  // The VM's balloon: "none", or "free-page-reporting" (freed guest pages go back to the host).
  std::string balloon = "none";
  // The CPU model boxes are emulated with (VmSpec::tcg_cpu_model): "" for QEMU's default.
  std::string guest_cpu;
  bool freePageReporting() const { return balloon == kFreePageReporting; }
  static constexpr const char* kFreePageReporting = "free-page-reporting";
  bool operator==(const SnapshotEnv&) const = default;
};

inline constexpr int kManifestFormat = 1;

struct SnapshotManifest {
  int format = kManifestFormat;
  SnapshotKind kind = SnapshotKind::kTemplate;
  SnapshotEnv env;
  std::string machine = "microvm";
  std::string ram_block = "mem";  // the memory backend id: a restore needs the same
  bool ignore_shared = true;      // the migration capability x-ignore-shared
  std::string ram = "file";       // "file": RAM in <dir>/memory; "stream": RAM inside state
  unsigned cpus = 1;
  uint64_t memory_mib = 512;
  std::string image_dir;  // the template build (kernel, initrd, base disk)
  std::string image_key;  // its manifest key
  std::string layer;      // the frozen disk layer
  uint64_t disk_bytes = 0;
  int64_t created_at = 0;
  // What the files were when the manifest was written (writeManifest fills these): the sizes
  // and XXH3-128 hashes (hex) of "state", "memory" (in the directory) and "layer" (frozen
  // layers only: not a suspended box's own disk). Manifests of earlier hutchd versions have
  // sizes only, or none, and the SHA-256 of a small "state": what is there is checked.
  std::map<std::string, uint64_t> file_sizes;
  std::map<std::string, std::string> file_hashes;
  std::string state_sha256;

  nlohmann::json toJson() const;
  static Result<SnapshotManifest> fromJson(const nlohmann::json& json);
  bool operator==(const SnapshotManifest&) const = default;
};

// Why this manifest cannot be restored here into a VM of `cpus` and `memory_mib`, or nullopt
// when it can. The text goes into errors and the box's boot note.
std::optional<std::string> incompatibility(const SnapshotManifest& manifest, const SnapshotEnv& env,
                                           unsigned cpus, uint64_t memory_mib);

// Reads <dir>/manifest.json and checks the snapshot's files against it: a file that is missing,
// truncated or grown, or whose content changed, is kFailedPrecondition saying what differs (a
// disk that filled up while it was written, a file damaged since): such a snapshot is never
// restored. The content is hashed once per file per hutchd (xxh3File's cache), so this reads
// whole files: call it off the event loop (event::offload).
Result<SnapshotManifest> readManifest(const std::filesystem::path& dir);
// Only reads <dir>/manifest.json, for what it says (which build a snapshot stands on): no file
// is checked.
Result<SnapshotManifest> loadManifest(const std::filesystem::path& dir);
// Writes <dir>/manifest.json (atomically), with the sizes and hashes of the files as they are
// now: call it once they are complete, off the event loop (it reads them whole).
Result<> writeManifest(const std::filesystem::path& dir, const SnapshotManifest& manifest);
// The XXH3-128 hash of a file's content, in hex. XXH3, not a cryptographic hash: what it guards
// against is damage (a full disk, a bad block, a stray write), not forgery (the files are
// root's), and it reads a 512 MiB memory file at memory speed. With use_cache, a file whose
// device, inode, size, mtime and ctime are what they were when this process last hashed it is
// not read again. Thread-safe.
Result<std::string> xxh3File(const std::filesystem::path& path, bool use_cache = true);

// Template snapshots are looked up by what a restore must match besides the host.
std::string templateSnapshotKey(const std::string& image_dir, unsigned cpus, uint64_t memory_mib);

// The backing file named in a qcow2 image's header; "" when it has none; kInvalidArgument when
// `image` is not qcow2. Relative names are resolved against the image's directory.
Result<std::filesystem::path> qcow2BackingFile(const std::filesystem::path& image);
// `top`, its backing file, that one's... down to the first image that is not qcow2 or has no
// backing file (included). A missing file ends the chain with an error.
Result<std::vector<std::filesystem::path>> backingChain(const std::filesystem::path& top);

// The host CPU's model name, for manifests.
std::string hostCpuModel(const std::filesystem::path& cpuinfo = "/proc/cpuinfo");

}  // namespace hutch::box

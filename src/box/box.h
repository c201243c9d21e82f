// A box as a value: what the store keeps and the API returns. The live parts (VM, agent link)
// live in BoxRuntime inside BoxService.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::box {

// creating -> running -> stopping -> stopped (shut down) or suspended (memory kept on disk);
// running <-> paused (vCPUs stopped, QEMU kept: idle pause); paused -> stopping; any live state
// -> failed (with a reason); stopped/suspended/failed -> creating (start). Removal is allowed
// from every state (rm -f if live). docs/snapshots.md "Suspend and idle pause".
enum class BoxState { kCreating, kRunning, kStopping, kStopped, kFailed, kPaused, kSuspended };

std::string_view stateName(BoxState state);
Result<BoxState> parseState(std::string_view text);

// Whether `from -> to` is a legal transition. The error says why not, for the API.
Result<> checkTransition(BoxState from, BoxState to);

struct BoxConfig {
  std::string template_name = "base";
  unsigned cpus = 1;
  uint64_t memory_mib = 512;
  uint64_t disk_mib = 0;  // 0: the template image's size; else at least that, the guest grows to it
  // The longest any command in the box may run before it is killed (detached processes are not
  // limited); 0: no limit. hutch run --max-exec-time.
  uint64_t max_exec_ms = 0;
  // How long the box may do no work before it is paused (idle pause); -1: the daemon's default
  // (hutchd --idle-pause), 0: never. hutch run --idle-pause.
  int64_t idle_pause_ms = -1;

  Result<> validate() const;
  bool operator==(const BoxConfig&) const = default;
};

// Who a box belongs to: the API key that made it (docs/api.md "Owners"). Empty id: the host
// administrator (the unix socket).
struct Owner {
  std::string id;    // the key's id (storage::ApiKey::id)
  std::string name;  // its name when the box was made, for listings
  bool operator==(const Owner&) const = default;
};

// A key's limits; 0 means no limit (docs/api.md "Owners").
struct Quota {
  uint64_t max_boxes = 0;       // boxes in any state
  uint64_t max_cpus = 0;        // summed over boxes that run
  uint64_t max_memory_mib = 0;  // summed over boxes that run
  uint64_t max_disk_mib = 0;    // summed over all boxes
  bool unlimited() const {
    return max_boxes == 0 && max_cpus == 0 && max_memory_mib == 0 && max_disk_mib == 0;
  }
  bool operator==(const Quota&) const = default;
};

// Variables every exec and process in a box gets (under what a request sets itself).
using BoxEnv = std::map<std::string, std::string>;
// Key-value labels a client attaches to a box (E2B's sandbox metadata); hutch only stores them.
using BoxMetadata = std::map<std::string, std::string>;

// What happens to a box when its lifetime (Box::expires_at) ends: E2B's sandbox timeout,
// hutch run --timeout --on-timeout.
enum class Expiry {
  kNone,     // no lifetime
  kRemove,   // removed, disk and all (E2B's default: the sandbox is killed)
  kStop,     // shut down, disk kept
  kSuspend,  // suspended, memory and disk kept (E2B's auto-pause), resumed on connect or start
};
std::string_view expiryName(Expiry expiry);  // "", "remove", "stop", "suspend"
Result<Expiry> parseExpiry(std::string_view text);

// A host directory shared into a box (hutch run -v HOSTDIR:BOXDIR[:ro]; docs/security.md
// "Shared folders"). Only the host's administrator may ask for one.
struct BoxShare {
  std::string host_dir;  // absolute; a directory not owned by root
  std::string box_dir;   // absolute, where the guest mounts it
  bool read_only = false;
  bool operator==(const BoxShare&) const = default;
};
// At most this many per box.
inline constexpr size_t kMaxShares = 8;
// Checks the paths' form (absolute, no ',' or newline, box paths unique and not '/'); the host
// directories themselves are checked when the box starts (jail::checkShareDir).
Result<> validateShares(const std::vector<BoxShare>& shares);
// "HOSTDIR:BOXDIR[:ro]" (hutch run -v), and back.
Result<BoxShare> parseShare(std::string_view text);
std::string shareText(const BoxShare& share);

// What a create request asks for.
struct BoxSpec {
  std::string name;  // empty: generated
  BoxConfig config;
  // Egress policy: a preset name or a JSON document (egress/policy.h); empty: the template's
  // default (network-policy.json in its directory) or else the daemon's.
  std::string network_policy;
  std::vector<std::string> secrets;  // names of host secrets the box may use (placeholders only)
  // Whose secrets `secrets` names (an owner id; "" is the host's administrator); none: the
  // box's owner's. A build box, owned by its build, uses those of whoever asked for the build.
  std::optional<std::string> secrets_owner;
  BoxEnv env;
  Owner owner;  // set by the API from the caller, never from the request body
  BoxMetadata metadata;
  int64_t expires_at = 0;  // unix seconds; 0: no lifetime
  Expiry on_expiry = Expiry::kNone;
  std::vector<BoxShare> shares;  // host directories shared in (admin only)
  bool operator==(const BoxSpec&) const = default;
};

// A host secret a box may use: the box sees only the placeholder (in its environment, as
// NAME=placeholder); hutch's egress proxy swaps in the value on the way out.
struct BoxSecret {
  std::string name;
  std::string placeholder;
  // Whose secret it is when not the box's owner's: a build box's are its caller's.
  std::optional<std::string> owner;
  bool operator==(const BoxSecret&) const = default;
};

struct Box {
  std::string id;    // 12 hex digits, immutable
  std::string name;  // unique, user-chosen or generated
  BoxConfig config;
  BoxState state = BoxState::kCreating;
  std::string reason;     // why the box failed; empty otherwise
  std::string accel;      // acceleration the VM runs with ("tcg", "kvm")
  std::string image_dir;  // the template build it was made from (kernel, initrd, base disk)
  std::string boot;       // how it last started: "restored from ..." or "cold boot: why"
  // The box's writable disk, a qcow2 file in its directory. A capture (fork, checkpoint)
  // freezes it as a layer and moves the box's writes to a new file.
  std::string disk = "disk.qcow2";
  int64_t pid = 0;         // VMM process id while running
  int64_t created_at = 0;  // unix seconds
  int64_t updated_at = 0;  // when it entered its state (setState)
  // The box's own uid and gid on the host are derived from this (jail::boxIds); unique among
  // boxes, taken at its first boot, freed with the box. -1: none yet.
  int64_t uid_index = -1;
  // The box's egress policy, as egress::toJson renders it ("" for boxes from before networking:
  // they get none).
  std::string network_policy;
  std::vector<BoxSecret> secrets;
  Owner owner;
  BoxEnv env;
  BoxMetadata metadata;
  // The box's lifetime: when it ends (unix seconds; 0: never) hutchd does on_expiry to it
  // (BoxService::expireDue). Set at create or later (setLifetime).
  int64_t expires_at = 0;
  Expiry on_expiry = Expiry::kNone;
  // Host directories shared in, mounted at every boot. Such a box is never snapshotted: it boots
  // cold, and cannot be suspended, forked, checkpointed or saved (QEMU cannot migrate virtio-fs).
  std::vector<BoxShare> shares;

  bool operator==(const Box&) const = default;
};

struct ForkSpec {
  std::vector<std::string> names;  // empty: generated
  unsigned count = 1;
};

// Space on disk, by what it belongs to (allocated bytes).
struct DiskUsage {
  struct Line {
    uint64_t count = 0;
    uint64_t bytes = 0;
  };
  Line templates;           // template builds in use by a template name
  Line template_snapshots;  // memory, state and disk layer of each template snapshot
  Line checkpoints;         // state files and frozen layers of checkpoints
  Line layers;              // other frozen layers boxes stand on (forks, removed checkpoints)
  Line boxes;               // each box's own overlay, logs and sockets
};

// The warm pool of one template and size (docs/snapshots.md "Warm pool").
struct PoolStatus {
  std::string template_name;
  unsigned cpus = 1;
  uint64_t memory_mib = 0;
  uint64_t ready = 0;    // restored, warmed-up, paused VMs waiting for a create
  uint64_t size = 0;     // how many it is kept at (hutchd --pool-size)
  bool filling = false;  // a refill is under way (or waiting for creates to finish)
};

// 12 random hex digits (getrandom), for box, snapshot and layer ids.
std::string randomId();
// Unix seconds now.
int64_t unixNow();
// Milliseconds from `t0` to now.
int64_t msSince(std::chrono::steady_clock::time_point t0);

// Checks env names ([A-Za-z_][A-Za-z0-9_]*, at most 256 entries) and values (no NUL).
Result<> validateEnv(const BoxEnv& env);

// Names: 1-63 chars of [a-zA-Z0-9_.-], starting with a letter or digit (like Docker).
Result<> validateName(std::string_view name);

}  // namespace hutch::box

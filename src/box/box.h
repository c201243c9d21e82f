// A box as a value: what the store keeps and the API returns. The live parts (VM, agent link)
// live in BoxRuntime inside BoxService.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::box {

// creating -> running -> stopping -> stopped; any -> failed (with a reason);
// stopped/failed -> creating (start). Removal is allowed from every state (rm -f if running).
enum class BoxState { kCreating, kRunning, kStopping, kStopped, kFailed };

std::string_view stateName(BoxState state);
Result<BoxState> parseState(std::string_view text);

// Whether `from -> to` is a legal transition. The error says why not, for the API.
Result<> checkTransition(BoxState from, BoxState to);

struct BoxConfig {
  std::string template_name = "base";
  unsigned cpus = 1;
  uint64_t memory_mib = 512;
  uint64_t disk_mib = 0;  // 0: the template image's size; else at least that, the guest grows to it

  Result<> validate() const;
  bool operator==(const BoxConfig&) const = default;
};

// What a create request asks for.
struct BoxSpec {
  std::string name;  // empty: generated
  BoxConfig config;
  bool operator==(const BoxSpec&) const = default;
};

struct Box {
  std::string id;    // 12 hex digits, immutable
  std::string name;  // unique, user-chosen or generated
  BoxConfig config;
  BoxState state = BoxState::kCreating;
  std::string reason;      // why the box failed; empty otherwise
  std::string accel;       // acceleration the VM runs with ("tcg", "kvm")
  std::string image_dir;   // the template build it was made from (kernel, initrd, base disk)
  int64_t pid = 0;         // VMM process id while running
  int64_t created_at = 0;  // unix seconds
  int64_t updated_at = 0;

  bool operator==(const Box&) const = default;
};

// Names: 1-63 chars of [a-zA-Z0-9_.-], starting with a letter or digit (like Docker).
Result<> validateName(std::string_view name);

}  // namespace hutch::box

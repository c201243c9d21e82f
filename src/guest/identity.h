// Identity: what the host gives a box restored from a snapshot so that it is not a copy of every
// other clone (AgentClient::applyIdentity, docs/protocol.md "Identity").
#pragma once

#include <string>
#include <string_view>

namespace hutch::guest {

struct Identity {
  std::string hostname;    // empty: unchanged
  std::string machine_id;  // 32 lowercase hex digits; empty: unchanged
  std::string seed;        // hex of 32-64 random bytes for the kernel RNG; empty: no reseed
  // Send the host's CLOCK_REALTIME, read when the request is sent.
  bool set_clock = true;
  // The host has just enlarged the disk (QMP block_resize): grow the root filesystem onto it.
  bool grow_root = false;

  bool operator==(const Identity&) const = default;
};

// A fresh identity for a box: hostname from the box name (hostnameFor), a random machine id (a
// version-4 UUID's 128 bits, as systemd makes them) and 48 random bytes of seed, from
// getrandom(2). set_clock is true, grow_root false.
Identity makeIdentity(std::string_view box_name);

// A valid hostname for a box name: '_' and other characters a hostname cannot have become '-',
// leading '-' and '.' are dropped, at most 64 characters; "box" if nothing is left.
std::string hostnameFor(std::string_view box_name);

}  // namespace hutch::guest

// SystemControl: the privileged operations behind a box's identity (docs/protocol.md,
// "Identity"): the wall clock, the hostname, the kernel RNG and the root filesystem's size.
//
// As PID 1 the agent uses realSystemControl(). A --listen agent on a host must never change the
// host's clock or hostname, so tests give it recordingSystemControl(DIR), which writes each
// operation as a line to DIR/system.log instead of doing it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "agent/init/grow_root.h"
#include "base/result.h"

namespace hutch::agent {

class SystemControl {
 public:
  virtual ~SystemControl() = default;

  // clock_settime(CLOCK_REALTIME).
  virtual Result<> setRealtime(int64_t ns_since_epoch) = 0;
  // sethostname() only (the files are identity.h's business).
  virtual Result<> setHostname(std::string_view name) = 0;
  // Mixes seed into the kernel's input pool, credited as entropy (RNDADDENTROPY), then reseeds
  // the CRNG from it at once (RNDRESEEDCRNG) so that no clone keeps the snapshot's RNG state.
  virtual Result<> seedRandom(std::string_view seed) = 0;
  // One attempt: grows the root filesystem if its disk is larger (see grow_root.h).
  virtual Result<RootGrowth> growRoot() = 0;
  // /etc/machine-id was just changed. Under systemd (the systemd template), journald keeps
  // writing to the directory of the id it started with, and journalctl reads only the current
  // id's: journald is restarted (without waiting) so that the box's journal follows its new id.
  // As PID 1 there is nothing to tell.
  virtual Result<> machineIdChanged() = 0;
};

std::unique_ptr<SystemControl> realSystemControl();

// Records "clock NS", "hostname NAME", "seed HEX", "machine_id" and "grow_root" lines in
// dir/system.log.
// growRoot() reports a disk that grew from 1 MiB to 2 MiB (4 KiB blocks) once the file
// dir/disk-grown exists, and an unchanged 1 MiB disk before that; the file lets a test decide
// when the "disk" grows.
std::unique_ptr<SystemControl> recordingSystemControl(std::string dir);

}  // namespace hutch::agent

// Named fault points (issue 18.3): steps of box operations at which a test has hutchd, the
// box's QEMU or hutch-egress killed with SIGKILL, as `kill -9` would, to check that every box
// ends in a defined state with nothing lost (tests/e2e/fault_test.cc).
//
// Off unless hutchd's environment names them: HUTCH_FAULT_POINTS=NAME[@N][:qemu|:egress][,...]
// kills at the Nth time NAME is passed (the first when @N is left out): hutchd itself, with
// `:qemu` the QEMU of the box the step works on, with `:egress` the running hutch-egress (hutchd
// goes on in both). The variable is read once; a point that is not named costs a branch.
#pragma once

#include <sys/types.h>

#include <string_view>

namespace hutch::fault {

// Every point hutchd has, in the order an operation passes them; tests iterate over it.
inline constexpr std::string_view kPoints[] = {
    "boot.vm-launched",         // a box's QEMU runs (created, started or restored); not running yet
    "boot.agent-ready",         // its agent answered and its network is up; state not yet running
    "capture.disk-frozen",      // checkpoint/fork: the disk's layer is frozen, the VM still paused
    "checkpoint.saved",         // the checkpoint's files are written, not yet recorded
    "suspend.state-recorded",   // a suspend's state is saved and recorded; QEMU still runs
    "remove.recorded",          // rm: the box's record is gone; its VM and files not yet
    "template.vm-booted",       // a template snapshot's VM answered; not yet ready or saved
    "template.snapshot-saved",  // its files and manifest are written, the snapshot not recorded
    "template.image-copied",    // template create --from: the disk flattened into <dir>.tmp
    "template.image-written",   // ... and renamed to <dir>; no template names it yet
};

// Kills this process (or `qemu`, the pid of the QEMU the step works on, 0 when there is none)
// with SIGKILL if HUTCH_FAULT_POINTS names `point` for this passage; says so on stderr first.
// `point` must be one of kPoints.
void point(std::string_view point, pid_t qemu = 0);

// The hutch-egress that runs now (0: none), for `:egress` faults; set by whoever starts it.
void setEgressPid(pid_t pid);

enum class Target { kHutchd, kQemu, kEgress };
struct Fault {
  int passage = 0;  // which passage kills; 0: none
  Target target = Target::kHutchd;
  bool operator==(const Fault&) const = default;
};
// The parsed variable for one point. For tests of the parser.
Fault faultFor(std::string_view spec, std::string_view point);

}  // namespace hutch::fault

// Power-off of the box: by the agent as PID 1, or asked of the init the agent serves under.
#pragma once

#include <sys/reboot.h>

namespace hutch::agent {

// The reboot(2) command that ends the VM. QEMU runs with -no-reboot, so a reset also makes it
// exit: if RB_POWER_OFF does not end QEMU under microvm, switch this one line to RB_AUTOBOOT.
inline constexpr int kPowerOffCommand = RB_POWER_OFF;

// How long processes get between SIGTERM and SIGKILL.
inline constexpr int kTermGraceMs = 3000;

// SIGTERM to every process, up to kTermGraceMs for them to exit (reaping meanwhile), SIGKILL
// to the rest, sync, remount / read-only, then reboot(kPowerOffCommand). Never returns.
[[noreturn]] void powerOff();

// As a service of systemd (the systemd template): asks PID 1 for an orderly power-off with
// SIGRTMIN+4, systemd's signal for poweroff.target. systemd stops every service (the agent too,
// with SIGTERM) and then powers the VM off. Returns false, logged, if the signal cannot be sent.
bool askInitToPowerOff();

}  // namespace hutch::agent

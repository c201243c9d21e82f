// A template's tree made to boot the image's own systemd as PID 1, with hutch-agent as its
// service, the way the systemd recipe is made (images/systemd; docs/guest-image.md "The systemd
// template"): `hutch template create --from-image REF --systemd`.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "image/root_dir.h"

namespace hutch::image {

// images/systemd's hutch-agent.service and /etc/hutch/ready, compiled in.
std::string_view systemdAgentUnit();
std::string_view systemdReadyCheck();

// The units the systemd recipe masks (images/systemd/setup.sh): no login prompt on the console,
// no apt, fstrim or e2scrub timers behind the box's wall.
inline constexpr std::string_view kMaskedUnits[] = {"getty.target", "apt-daily.timer",
                                                    "apt-daily-upgrade.timer", "fstrim.timer",
                                                    "e2scrub_all.timer"};

// Writes into `root`: /etc/hutch/init naming the tree's systemd (which the initramfs starts as
// PID 1), /etc/hutch/ready (the template's snapshot waits for a booted system),
// /etc/systemd/system/hutch-agent.service enabled (basic.target wants it), and kMaskedUnits
// masked where the image has no file of that name in /etc/systemd/system. Returns the path of
// systemd in the image ("/usr/lib/systemd/systemd" or "/lib/systemd/systemd"); kFailedPrecondition
// when the tree has no systemd there (nothing is written then).
Result<std::string> addSystemdInit(RootDir& root);

}  // namespace hutch::image

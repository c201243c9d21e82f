// What the agent does first in a box, before serving the host: as the box's init (PID 1), or as
// a service of another init (systemd, in the systemd template: docs/guest-image.md).
#pragma once

namespace hutch::agent {

// Mounts, loopback, hostname, network, root growth, Ctrl-Alt-Del as SIGINT. Failures are
// logged, never fatal.
void setUpAsPid1();

// The same without what the init already did (mounts, loopback) or owns (Ctrl-Alt-Del): the
// hostname, the network and the root filesystem's growth. Failures are logged, never fatal.
void setUpAsService();

}  // namespace hutch::agent

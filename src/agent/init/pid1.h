// What the agent does first when it is the box's init (PID 1), before serving the host.
#pragma once

namespace hutch::agent {

// Mounts, loopback, hostname, Ctrl-Alt-Del as SIGINT. Failures are logged, never fatal.
void setUpAsPid1();

}  // namespace hutch::agent

#include "agent/init/pid1.h"

#include <sys/reboot.h>
#include <sys/stat.h>

#include "agent/init/grow_root.h"
#include "agent/init/identity.h"
#include "agent/init/kernel_cmdline.h"
#include "agent/init/loopback.h"
#include "agent/init/mounts.h"
#include "agent/init/network.h"
#include "agent/log.h"

namespace hutch::agent {

namespace {

void configureBox() {
  auto system = realSystemControl();
  std::string cmdline = readKernelCmdline();
  if (auto named = applyHostname(cmdline, *system); !named) {
    logWarning(named.error().describe());
  }
  if (auto net = parseNetConfig(cmdline); !net) {
    logWarning(net.error().describe());
  } else if (*net) {
    if (auto up = applyNetConfig(**net); !up) logWarning(up.error().describe());
  }
  if (auto grown = growRootFilesystem(deviceOf("/")); !grown) {
    logWarning(grown.error().describe());
  } else if (grown->grew()) {
    logInfo("Grew the root filesystem to " + std::to_string(grown->blocks_after) + " blocks");
  }
}

}  // namespace

void setUpAsPid1() {
  ::umask(022);
  mountSystemFilesystems();
  if (auto up = bringUpLoopback(); !up) logWarning(up.error().describe());
  configureBox();
  // Ctrl-Alt-Del arrives as SIGINT (handled as a power-off) instead of an immediate reboot.
  ::reboot(RB_DISABLE_CAD);
}

void setUpAsService() {
  configureBox();
}

}  // namespace hutch::agent

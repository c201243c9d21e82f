#include "agent/init/power.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "agent/init/reaper.h"
#include "agent/log.h"

namespace hutch::agent {
namespace {

// Reaps until no child is left or the time is up; true if none is left.
bool reapUntilGone(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    reapChildren(nullptr);
    // As PID 1 every process in the box is a descendant: ECHILD means there are none left.
    if (::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::usleep(20 * 1000);
  }
}

}  // namespace

void powerOff() {
  logInfo("Powering off: stopping all processes");
  ::kill(-1, SIGTERM);
  if (!reapUntilGone(std::chrono::milliseconds(kTermGraceMs))) {
    logInfo("Killing the processes that are still running");
    ::kill(-1, SIGKILL);
    reapUntilGone(std::chrono::milliseconds(1000));
  }
  ::sync();
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    logWarning(std::string("Cannot remount / read-only: ") + std::strerror(errno));
  }
  ::sync();
  ::reboot(kPowerOffCommand);
  logError(std::string("reboot() failed: ") + std::strerror(errno));
  while (true) ::pause();  // PID 1 must not exit
}

bool askInitToPowerOff() {
  logInfo("Powering off: asking the init (PID 1) to stop the box's services and power off");
  if (::kill(1, SIGRTMIN + 4) != 0) {
    logError(std::string("Cannot signal PID 1 to power off: ") + std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace hutch::agent

#include "cli/terminal.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>

namespace hutch::cli {

namespace {

// The one active raw terminal, for the exit and signal paths that cannot reach the RawMode
// object. g_raw_fd is set only after g_saved is complete, and cleared before anything else.
volatile std::sig_atomic_t g_raw_fd = -1;
struct termios g_saved {};
bool g_atexit_registered = false;

void restoreSaved() {
  const int fd = g_raw_fd;
  if (fd < 0) return;
  g_raw_fd = -1;
  ::tcsetattr(fd, TCSANOW, &g_saved);  // async-signal-safe
}

extern "C" void restoreAtExit() {
  restoreSaved();
}

// Installed with SA_RESETHAND: the default action is back in place when this runs, so the
// re-raised signal ends the process as it would have without us.
extern "C" void restoreAndReraise(int signo) {
  const int saved_errno = errno;
  restoreSaved();
  ::raise(signo);
  errno = saved_errno;
}

// Signals whose default action ends the process and that the exec loop does not watch.
constexpr int kFatalSignals[] = {SIGABRT, SIGALRM, SIGBUS,    SIGFPE,  SIGILL,
                                 SIGPIPE, SIGPROF, SIGSEGV,   SIGSYS,  SIGTRAP,
                                 SIGUSR1, SIGUSR2, SIGVTALRM, SIGXCPU, SIGXFSZ};

}  // namespace

bool isTerminal(int fd) {
  return ::isatty(fd) == 1;
}

std::optional<TerminalSize> terminalSize(int fd) {
  struct winsize size {};
  if (::ioctl(fd, TIOCGWINSZ, &size) != 0) return std::nullopt;
  return TerminalSize{size.ws_row, size.ws_col};
}

Result<std::unique_ptr<RawMode>> RawMode::enter(int fd) {
  struct termios saved {};
  if (::tcgetattr(fd, &saved) != 0) {
    return fail(sysError("Cannot read the terminal's modes", errno));
  }
  if (g_raw_fd >= 0) return fail(Errc::kInternal, "The terminal is already in raw mode");
  std::unique_ptr<RawMode> raw(new RawMode());
  g_saved = saved;
  g_raw_fd = fd;
  if (!g_atexit_registered) {
    g_atexit_registered = std::atexit(restoreAtExit) == 0;
  }
  for (int signo : kFatalSignals) {
    struct sigaction current {};
    if (::sigaction(signo, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction handler {};
    handler.sa_handler = restoreAndReraise;
    handler.sa_flags = SA_RESETHAND;
    ::sigemptyset(&handler.sa_mask);
    if (::sigaction(signo, &handler, nullptr) == 0) {
      raw->previous_handlers_.emplace_back(signo, current);
    }
  }
  struct termios modes = saved;
  ::cfmakeraw(&modes);
  if (::tcsetattr(fd, TCSANOW, &modes) != 0) {
    return fail(sysError("Cannot put the terminal in raw mode", errno));  // ~RawMode undoes
  }
  return raw;
}

void RawMode::restore() {
  if (!active_) return;
  active_ = false;
  restoreSaved();
  for (const auto& [signo, action] : previous_handlers_) ::sigaction(signo, &action, nullptr);
  previous_handlers_.clear();
}

RawMode::~RawMode() {
  restore();
}

Result<std::unique_ptr<SignalWatch>> SignalWatch::create(std::initializer_list<int> signals) {
  sigset_t set;
  ::sigemptyset(&set);
  for (int signo : signals) ::sigaddset(&set, signo);
  sigset_t previous;
  if (::sigprocmask(SIG_BLOCK, &set, &previous) != 0) {
    return fail(sysError("Cannot block signals", errno));
  }
  const int fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return fail(sysError("Cannot watch signals", err));
  }
  return std::unique_ptr<SignalWatch>(new SignalWatch(UniqueFd(fd), previous));
}

int SignalWatch::take() {
  struct signalfd_siginfo info {};
  while (true) {
    const ssize_t n = ::read(fd_.get(), &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}

SignalWatch::~SignalWatch() {
  // What arrived after the loop stopped looking is dropped rather than delivered with its
  // default action now (a late ^C must not turn the command's exit status into ours).
  while (take() != 0) {
  }
  ::sigprocmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace hutch::cli

#include "agent/exec/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace hutch::agent {
namespace {

// What the child was doing when it failed, sent with errno over the error pipe.
enum class Stage : int { kSetup = 1, kCredentials = 2, kChdir = 3, kExec = 4 };

struct ChildFailure {
  Stage stage;
  int err;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Result<Pipe> makePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

Result<> setNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return fail(sysError("Cannot make a pipe non-blocking", errno));
  }
  return ok();
}

Result<UniqueFd> duplicate(int fd) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) return fail(sysError("Cannot duplicate a terminal descriptor", errno));
  return UniqueFd(copy);
}

struct PtyPair {
  UniqueFd master;
  UniqueFd slave;
};

// A pty pair, both ends close-on-exec (only the loop thread forks, so nothing forks between
// openpty and fcntl; the file workers never fork), sized as asked, with IUTF8 so that line
// editing erases whole characters.
Result<PtyPair> makeTerminal(const SpawnSpec& spec) {
  int master = -1;
  int slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
    return fail(sysError("Cannot open a pseudo-terminal", errno));
  }
  PtyPair pty{UniqueFd(master), UniqueFd(slave)};
  for (int fd : {master, slave}) {
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      return fail(sysError("Cannot set close-on-exec on a pseudo-terminal", errno));
    }
  }
  struct termios modes {};
  if (::tcgetattr(slave, &modes) == 0) {
    modes.c_iflag |= IUTF8;
    ::tcsetattr(slave, TCSANOW, &modes);
  }
  if (spec.rows != 0 || spec.cols != 0) {
    struct winsize size {};
    size.ws_row = spec.rows;
    size.ws_col = spec.cols;
    if (::ioctl(master, TIOCSWINSZ, &size) != 0) {
      return fail(sysError("Cannot set the terminal size", errno));
    }
  }
  return pty;
}

std::vector<char*> cStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void childFail(int error_fd, Stage stage) {
  const ChildFailure failure{stage, errno};
  [[maybe_unused]] ssize_t n = ::write(error_fd, &failure, sizeof failure);
  ::_exit(127);
}

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void runChild(const SpawnSpec& spec, char* const* argv, char* const* envp,
                           int stdin_fd, int stdout_fd, int stderr_fd, int error_fd) {
  sigset_t all;
  ::sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // EINVAL for some: fine

  if (::setsid() < 0) childFail(error_fd, Stage::kSetup);
  // The new session's leader takes the slave as its controlling terminal; its process group
  // becomes the terminal's foreground group, so ^C from the host reaches it as SIGINT.
  if (spec.tty) {
    if (::ioctl(stdin_fd, TIOCSCTTY, 0) != 0) childFail(error_fd, Stage::kSetup);
    // The user owns their terminal, as after a login (tools that reopen it need that); a
    // failure (an unprivileged --listen agent) changes nothing that matters.
    [[maybe_unused]] const int chowned = ::fchown(stdin_fd, spec.uid, static_cast<gid_t>(-1));
  }
  // dup2 leaves the new descriptors without close-on-exec; the originals close at exec.
  if (::dup2(stdin_fd, 0) < 0 || ::dup2(stdout_fd, 1) < 0 || ::dup2(stderr_fd, 2) < 0) {
    childFail(error_fd, Stage::kSetup);
  }
  // Switching to the identity we already have is skipped, so an unprivileged --listen agent can
  // run commands as itself.
  if (spec.uid != ::geteuid() || spec.gid != ::getegid()) {
    if (::setgroups(spec.groups.size(), spec.groups.data()) != 0 || ::setgid(spec.gid) != 0 ||
        ::setuid(spec.uid) != 0) {
      childFail(error_fd, Stage::kCredentials);
    }
  }
  // Set after setuid (which clears it): the process dies with the agent in --listen mode.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::chdir(spec.cwd.c_str()) != 0) childFail(error_fd, Stage::kChdir);
  ::execve(spec.path.c_str(), argv, envp);
  childFail(error_fd, Stage::kExec);
}

Error childError(const SpawnSpec& spec, const ChildFailure& failure) {
  const std::string command = "\"" + spec.argv[0] + "\"";
  switch (failure.stage) {
    case Stage::kChdir:
      if (failure.err == ENOENT || failure.err == ENOTDIR) {
        return Error(Errc::kNotFound, "Working directory \"" + spec.cwd + "\" does not exist");
      }
      return Error(Errc::kInvalidArgument,
                   "User " + spec.user + " cannot enter working directory \"" + spec.cwd + "\"",
                   failure.err);
    case Stage::kExec:
      if (failure.err == ENOENT) {
        return Error(Errc::kNotFound, "Command " + command + " was not found", failure.err);
      }
      if (failure.err == EACCES || failure.err == EPERM) {
        return Error(Errc::kInvalidArgument,
                     "Command " + command + " is not executable by user " + spec.user, failure.err);
      }
      if (failure.err == ENOEXEC) {
        return Error(Errc::kInvalidArgument,
                     "Command " + command + " is not in an executable format", failure.err);
      }
      return Error(Errc::kInvalidArgument, "Cannot execute command " + command, failure.err);
    case Stage::kCredentials:
      return Error(Errc::kInternal, "Cannot switch to user " + spec.user, failure.err);
    case Stage::kSetup: break;
  }
  return Error(Errc::kInternal, "Cannot set up the process for " + command, failure.err);
}

// Forks the child with in/out/err as its 0/1/2 and waits until it has exec'd (its pid) or
// failed (the error; that child is reaped). The caller closes its copies of the child's ends.
Result<pid_t> forkChild(const SpawnSpec& spec, int in, int out, int err) {
  HUTCH_TRY(Pipe status, makePipe());
  // Everything the child needs is built before fork: it must not allocate.
  std::vector<char*> argv = cStrings(spec.argv);
  std::vector<char*> envp = cStrings(spec.env);

  const pid_t pid = ::fork();
  if (pid < 0) return fail(sysError("Cannot fork", errno));
  if (pid == 0) runChild(spec, argv.data(), envp.data(), in, out, err, status.write.get());
  status.write.reset();

  ChildFailure failure{};
  size_t got = 0;
  while (got < sizeof failure) {
    const ssize_t n =
        ::read(status.read.get(), reinterpret_cast<char*>(&failure) + got, sizeof failure - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got == sizeof failure) {
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    return fail(childError(spec, failure));
  }
  return pid;
}

Result<SpawnedProcess> finishSpawn(SpawnedProcess process) {
  for (int fd : {process.stdout_fd.get(), process.stderr_fd.get(), process.stdin_fd.get()}) {
    if (fd < 0) continue;
    if (auto r = setNonBlocking(fd); !r) {
      ::kill(-process.pid, SIGKILL);  // reaped by the agent's reaper as an orphan
      return fail(r.error());
    }
  }
  return process;
}

Result<SpawnedProcess> spawnOnTerminal(const SpawnSpec& spec) {
  HUTCH_TRY(PtyPair pty, makeTerminal(spec));
  SpawnedProcess process;
  // Duplicates made before fork, so a failure leaves no process behind.
  HUTCH_TRY(process.stdout_fd, duplicate(pty.master.get()));
  if (spec.pipe_stdin) {
    HUTCH_TRY(process.stdin_fd, duplicate(pty.master.get()));
  }
  const int slave = pty.slave.get();
  HUTCH_TRY(process.pid, forkChild(spec, slave, slave, slave));
  pty.slave.reset();  // from now on only the child (and what it starts) holds the slave
  process.terminal_fd = std::move(pty.master);
  return finishSpawn(std::move(process));
}

}  // namespace

Result<pid_t> spawnDetached(const SpawnSpec& spec, int output_fd) {
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null) return fail(sysError("Cannot open /dev/null", errno));
  return forkChild(spec, null.get(), output_fd, output_fd);
}

Result<SpawnedProcess> spawnProcess(const SpawnSpec& spec) {
  if (spec.tty) return spawnOnTerminal(spec);
  HUTCH_TRY(Pipe out, makePipe());
  HUTCH_TRY(Pipe err, makePipe());
  Pipe in;
  if (spec.pipe_stdin) {
    HUTCH_TRY(in, makePipe());
  } else {
    in.read = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in.read) return fail(sysError("Cannot open /dev/null", errno));
  }
  SpawnedProcess process;
  HUTCH_TRY(process.pid, forkChild(spec, in.read.get(), out.write.get(), err.write.get()));
  process.stdout_fd = std::move(out.read);
  process.stderr_fd = std::move(err.read);
  if (spec.pipe_stdin) process.stdin_fd = std::move(in.write);
  return finishSpawn(std::move(process));
}

}  // namespace hutch::agent

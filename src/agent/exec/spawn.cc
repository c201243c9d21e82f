#include "agent/exec/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
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

}  // namespace

Result<SpawnedProcess> spawnProcess(const SpawnSpec& spec) {
  HUTCH_TRY(Pipe out, makePipe());
  HUTCH_TRY(Pipe err, makePipe());
  HUTCH_TRY(Pipe status, makePipe());
  Pipe in;
  if (spec.pipe_stdin) {
    HUTCH_TRY(in, makePipe());
  } else {
    in.read = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in.read) return fail(sysError("Cannot open /dev/null", errno));
  }

  // Everything the child needs is built before fork: it must not allocate.
  std::vector<char*> argv = cStrings(spec.argv);
  std::vector<char*> envp = cStrings(spec.env);

  const pid_t pid = ::fork();
  if (pid < 0) return fail(sysError("Cannot fork", errno));
  if (pid == 0) {
    runChild(spec, argv.data(), envp.data(), in.read.get(), out.write.get(), err.write.get(),
             status.write.get());
  }

  // Parent: keep our ends only.
  in.read.reset();
  out.write.reset();
  err.write.reset();
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

  SpawnedProcess process;
  process.pid = pid;
  process.stdout_fd = std::move(out.read);
  process.stderr_fd = std::move(err.read);
  if (spec.pipe_stdin) process.stdin_fd = std::move(in.write);
  for (int fd : {process.stdout_fd.get(), process.stderr_fd.get(), process.stdin_fd.get()}) {
    if (fd < 0) continue;
    if (auto r = setNonBlocking(fd); !r) {
      ::kill(-pid, SIGKILL);  // reaped by the agent's reaper as an orphan
      return fail(r.error());
    }
  }
  return process;
}

}  // namespace hutch::agent

#include "sys/spawn.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace hutch::sys {

namespace {

// Marks every descriptor from `first` on close-on-exec. Async-signal-safe.
void markAllCloexec(int first) {
  if (::syscall(SYS_close_range, first, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  // Kernels before 5.11: walk the descriptor table.
  struct rlimit lim {};
  int max_fd = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    max_fd = static_cast<int>(std::min<rlim_t>(lim.rlim_cur, 1 << 20));
  }
  for (int fd = first; fd < max_fd; ++fd) {
    int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

[[noreturn]] void childFail(int report_fd, int err) {
  ssize_t unused = ::write(report_fd, &err, sizeof err);
  (void)unused;
  ::_exit(127);
}

// Runs in the forked child: only async-signal-safe calls from here on.
[[noreturn]] void runChild(const SpawnOptions& options, const char* program, char* const* argv,
                           char* const* envp, int report_fd, pid_t parent) {
  if (options.die_with_parent && options.clone_flags == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // it died before the line above
  }
  sigset_t all;
  ::sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);

  if (options.new_session && ::setsid() < 0) childFail(report_fd, errno);

  int max_target = 2;
  for (const FdMapping& m : options.fds) max_target = std::max(max_target, m.child_fd);
  int high = max_target + 1;
  // Move the report pipe and every source above all targets so no dup2 clobbers them.
  report_fd = ::fcntl(report_fd, F_DUPFD_CLOEXEC, high);
  if (report_fd < 0) ::_exit(127);
  int temps[64];
  size_t count = std::min<size_t>(options.fds.size(), 64);
  if (options.fds.size() > 64) childFail(report_fd, EMFILE);
  for (size_t i = 0; i < count; ++i) {
    temps[i] = ::fcntl(options.fds[i].parent_fd, F_DUPFD_CLOEXEC, high);
    if (temps[i] < 0) childFail(report_fd, errno);
  }
  markAllCloexec(0);
  bool have[3] = {false, false, false};
  for (size_t i = 0; i < count; ++i) {
    int target = options.fds[i].child_fd;
    if (::dup2(temps[i], target) < 0) childFail(report_fd, errno);
    if (target <= 2) have[target] = true;
  }
  for (int target = 0; target <= 2; ++target) {
    if (have[target]) continue;
    int null_fd = ::open("/dev/null", target == 0 ? O_RDONLY : O_WRONLY);
    if (null_fd < 0) childFail(report_fd, errno);
    if (null_fd != target) {
      if (::dup2(null_fd, target) < 0) childFail(report_fd, errno);
      ::close(null_fd);
    }
  }
  if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) childFail(report_fd, errno);
  ::execve(program, argv, envp);
  childFail(report_fd, errno);
}

}  // namespace

Result<std::filesystem::path> findExecutable(std::string_view name) {
  if (name.empty()) return fail(Errc::kInvalidArgument, "The program name is empty");
  if (name.find('/') != std::string_view::npos) {
    if (::access(std::string(name).c_str(), X_OK) != 0) {
      return fail(sysError("Cannot execute " + std::string(name), errno));
    }
    return std::filesystem::path(name);
  }
  const char* path_env = std::getenv("PATH");
  std::string_view dirs = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    size_t colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return fail(Errc::kNotFound,
              "Cannot find " + std::string(name) + " in PATH: install it or give its full path");
}

Result<pid_t> spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return fail(Errc::kInvalidArgument, "Cannot spawn an empty argv");
  for (const FdMapping& m : options.fds) {
    if (m.parent_fd < 0 || m.child_fd < 0) {
      return fail(Errc::kInvalidArgument, "Spawn fd mapping with a negative descriptor");
    }
  }
  constexpr unsigned long kNamespaceFlags =
      CLONE_NEWCGROUP | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS;
  if ((options.clone_flags & ~kNamespaceFlags) != 0) {
    return fail(Errc::kInvalidArgument,
                "Spawn clone_flags may only hold CLONE_NEW* namespace flags");
  }
  HUTCH_TRY(std::filesystem::path program, findExecutable(options.argv.front()));

  // Everything the child needs is prepared before fork: the child must not allocate.
  std::vector<char*> argv;
  for (const std::string& arg : options.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (options.env) {
    for (const std::string& var : *options.env) envp.push_back(const_cast<char*>(var.c_str()));
    envp.push_back(nullptr);
  }
  char* const* env_ptr = options.env ? envp.data() : environ;

  const pid_t parent = ::getpid();
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
  // A clone without CLONE_VM and without a new stack behaves like fork(); glibc's fork handlers do
  // not run, which is fine because the child only makes async-signal-safe calls before exec.
  pid_t pid = options.clone_flags == 0
                  ? ::fork()
                  : static_cast<pid_t>(::syscall(SYS_clone, options.clone_flags | SIGCHLD, nullptr,
                                                 nullptr, nullptr, nullptr));
  if (pid < 0) {
    int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    return fail(sysError(options.clone_flags == 0 ? "Cannot fork" : "Cannot clone", err));
  }
  if (pid == 0) {
    ::close(report[0]);
    runChild(options, program.c_str(), argv.data(), env_ptr, report[1], parent);
  }
  ::close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return fail(sysError("Cannot start " + program.string(), child_errno));
  }
  return pid;
}

}  // namespace hutch::sys

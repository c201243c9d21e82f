// jail_probe: run through hutch-jail exactly as QEMU would be, it tries what an escaped guest
// would try and prints one line per attempt: "<command> <arg>: OK" or "...: ERR <ERRNO>".
//
//   jail_probe COMMAND [ARG] [, COMMAND [ARG]]...
//
// read PATH | write PATH | exec PATH | ls DIR | mountopts PATH | connect SOCKET |
// socket unix|inet|netlink | signal PID | ptrace PID | pidfd PID | killall | whoami |
// forkbomb | hog MIB | sleep
//
// And calls hutch's seccomp filter denies, each made so that without the filter the kernel gives
// another answer than the filter's (success, or an error it finds before any capability check):
// unshare | clone-newuser | clone3 | setns | mount | bpf | keyctl | io_uring | userfaultfd |
// perf | ptrace-child | vmread-child
#include <dirent.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string errnoName(int err) {
  switch (err) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EACCES: return "EACCES";
    case EAGAIN: return "EAGAIN";
    case EROFS: return "EROFS";
    case ENOSYS: return "ENOSYS";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case EEXIST: return "EEXIST";
    case ENOTDIR: return "ENOTDIR";
    case EBADF: return "EBADF";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return "E" + std::to_string(err);
  }
}

void report(const std::string& what, bool ok, int err = 0) {
  std::printf("%s: %s\n", what.c_str(), ok ? "OK" : ("ERR " + errnoName(err)).c_str());
  std::fflush(stdout);
}

void result(const std::string& what, long rc) {
  report(what, rc >= 0, errno);
}

std::string statusField(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::string value = line.substr(key.size() + 1);
      size_t start = value.find_first_not_of(" \t");
      return start == std::string::npos ? "" : value.substr(start);
    }
  }
  return "(none)";
}

void whoami() {
  std::printf("uid %u %u\ngid %u %u\npid %d\n", ::getuid(), ::geteuid(), ::getgid(), ::getegid(),
              ::getpid());
  std::printf("groups %d\n", ::getgroups(0, nullptr));
  for (const char* key : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
                          "Seccomp_filters"}) {
    std::printf("%s %s\n", key, statusField(key).c_str());
  }
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  std::printf("hostname %s\n", host);
  for (const char* ns : {"mnt", "pid", "ipc", "uts", "net", "cgroup", "user"}) {
    char target[128] = {};
    ssize_t n = ::readlink(("/proc/self/ns/" + std::string(ns)).c_str(), target, sizeof target - 1);
    std::printf("ns %s %s\n", ns, n > 0 ? target : "?");
  }
  struct rlimit core {};
  ::getrlimit(RLIMIT_CORE, &core);
  std::printf("core %llu\n", static_cast<unsigned long long>(core.rlim_max));
  std::printf("umask %03o\n", ::umask(077));
  std::fflush(stdout);
}

void forkbomb() {
  int forked = 0;
  for (;;) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::pause();
      ::_exit(0);
    }
    if (pid < 0) {
      std::printf("forkbomb: forked %d ERR %s\n", forked, errnoName(errno).c_str());
      std::fflush(stdout);
      return;
    }
    if (++forked > 100000) {
      std::printf("forkbomb: forked %d without a limit\n", forked);
      std::fflush(stdout);
      return;
    }
  }
}

void hog(long mib) {
  for (long i = 0; i < mib; ++i) {
    void* block =
        ::mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) {
      report("hog " + std::to_string(mib), false, errno);
      return;
    }
    std::memset(block, 0x5a, 1 << 20);
  }
  report("hog " + std::to_string(mib), true);
}

void listDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) {
    report("ls " + path, false, errno);
    return;
  }
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : " ") + name;
  std::printf("ls %s: %s\n", path.c_str(), joined.c_str());
  std::fflush(stdout);
}

// The mount options of the mount at `path` (/proc/self/mountinfo), e.g. "ro,nosuid,nodev".
void mountOptions(const std::string& path) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  std::string found = "(not a mount point)";
  while (std::getline(mountinfo, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, options;
    fields >> id >> parent >> dev >> root >> point >> options;
    if (point == path) found = options;  // the last one is on top
  }
  std::printf("mountopts %s: %s\n", path.c_str(), found.c_str());
  std::fflush(stdout);
}

// Runs `call` in a child process and reports how it went there: for calls that would change the
// probe itself (a new user namespace) or need a process to act on.
template <class Call>
void inChild(const std::string& what, Call call) {
  pid_t pid = ::fork();
  if (pid == 0) {
    long rc = call();
    ::_exit(rc >= 0 ? 0 : 100 + errno);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  report(what, code == 0, code >= 100 ? code - 100 : 0);
}

// A child that waits to be acted on (ptrace, process_vm_readv); killed afterwards.
template <class Call>
void onChild(const std::string& what, Call call) {
  pid_t child = ::fork();
  if (child == 0) {
    for (;;) ::pause();
  }
  long rc = call(child);
  int err = errno;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  report(what, rc >= 0, err);
}

pid_t toPid(const std::string& text) {
  return static_cast<pid_t>(std::strtol(text.c_str(), nullptr, 10));
}

int run(const std::string& cmd, const std::string& arg) {
  std::string what = arg.empty() ? cmd : cmd + " " + arg;
  if (cmd == "read") {
    int fd = ::open(arg.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return report(what, false, errno), 0;
    char buf[64];
    ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    result(what, n);
  } else if (cmd == "write") {
    int fd = ::open(arg.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return report(what, false, errno), 0;
    result(what, ::write(fd, "x", 1));
    ::close(fd);
  } else if (cmd == "exec") {
    pid_t pid = ::fork();
    if (pid == 0) {
      char* argv[] = {const_cast<char*>(arg.c_str()), nullptr};
      ::execve(arg.c_str(), argv, nullptr);
      ::_exit(100 + errno);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code >= 100) {
      report(what, false, code - 100);
    } else {
      report(what, true);
    }
  } else if (cmd == "ls") {
    listDir(arg);
  } else if (cmd == "connect") {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", arg.c_str());
    result(what, ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr));
    ::close(fd);
  } else if (cmd == "socket") {
    int family = arg == "inet"      ? AF_INET
                 : arg == "inet6"   ? AF_INET6
                 : arg == "netlink" ? AF_NETLINK
                                    : AF_UNIX;
    int type = family == AF_NETLINK ? SOCK_RAW : SOCK_STREAM;
    int fd = ::socket(family, type | SOCK_CLOEXEC, 0);
    result(what, fd);
    if (fd >= 0) ::close(fd);
  } else if (cmd == "signal") {
    result(what, ::kill(toPid(arg), SIGKILL));
  } else if (cmd == "ptrace") {
    result(what, ::ptrace(PTRACE_ATTACH, toPid(arg), nullptr, nullptr));
  } else if (cmd == "pidfd") {
    result(what, ::syscall(SYS_pidfd_open, toPid(arg), 0));
  } else if (cmd == "killall") {
    result(what, ::kill(-1, SIGKILL));
  } else if (cmd == "unshare") {
    // A user namespace: full capabilities over namespaces of its own (a favourite first step).
    inChild(what, [] { return static_cast<long>(::unshare(CLONE_NEWUSER)); });
  } else if (cmd == "clone-newuser") {
    inChild(what, [] {
      long pid = ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
      if (pid == 0) ::_exit(0);
      if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
      return pid;
    });
  } else if (cmd == "clone3") {
    inChild(what, [] {
      struct clone_args args {};
      args.exit_signal = SIGCHLD;
      long pid = ::syscall(SYS_clone3, &args, sizeof args);
      if (pid == 0) ::_exit(0);
      if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
      return pid;
    });
  } else if (cmd == "setns") {
    result(what, ::setns(-1, 0));  // without the filter: EBADF, before any capability check
  } else if (cmd == "mount") {
    // The target is looked up before the capability check: ENOENT without the filter.
    result(what, ::mount("tmpfs", "/hutch-no-such-dir", "tmpfs", 0, nullptr));
  } else if (cmd == "bpf") {
    union bpf_attr attr {};
    result(what, ::syscall(SYS_bpf, 1000, &attr, sizeof attr));  // no such command: EINVAL
  } else if (cmd == "io_uring") {
    struct io_uring_params params {};
    long fd = ::syscall(SYS_io_uring_setup, 4, &params);
    result(what, fd);
    if (fd >= 0) ::close(static_cast<int>(fd));
  } else if (cmd == "keyctl") {
    result(what, ::syscall(SYS_keyctl, 9999, 0, 0, 0, 0));  // no such operation: EOPNOTSUPP
  } else if (cmd == "userfaultfd") {
    long fd = ::syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    result(what, fd);
    if (fd >= 0) ::close(static_cast<int>(fd));
  } else if (cmd == "perf") {
    struct perf_event_attr attr {};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    result(what, fd);
    if (fd >= 0) ::close(static_cast<int>(fd));
  } else if (cmd == "ptrace-child") {
    onChild(what, [](pid_t child) { return ::ptrace(PTRACE_ATTACH, child, nullptr, nullptr); });
  } else if (cmd == "vmread-child") {
    onChild(what, [](pid_t child) {
      static char here[8];
      static char there[8];
      iovec local{here, sizeof here};
      iovec remote{there, sizeof there};  // the same address in the forked child
      return static_cast<long>(::process_vm_readv(child, &local, 1, &remote, 1, 0));
    });
  } else if (cmd == "mountopts") {
    mountOptions(arg);
  } else if (cmd == "whoami") {
    whoami();
  } else if (cmd == "forkbomb") {
    forkbomb();
  } else if (cmd == "hog") {
    hog(std::strtol(arg.c_str(), nullptr, 10));
  } else if (cmd == "sleep") {
    std::printf("sleeping\n");
    std::fflush(stdout);
    for (;;) ::pause();
  } else {
    std::fprintf(stderr, "jail_probe: unknown command %s\n", cmd.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  size_t i = 0;
  while (i < words.size()) {
    std::string cmd = words[i++];
    std::string arg;
    if (i < words.size() && words[i] != ",") arg = words[i++];
    if (i < words.size() && words[i] == ",") ++i;
    if (int rc = run(cmd, arg); rc != 0) return rc;
  }
  // PID 1 of the jail: its exit takes every process it forked with it.
  return 0;
}

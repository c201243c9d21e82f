// The jail, proven with a probe run exactly as QEMU would be: what it can see, who it is, what it
// can do to other boxes, and where the cgroup stops it.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"
#include "jail/box_dir.h"
#include "jail/enter.h"

namespace hutch::jail::test {
namespace {

namespace fs = std::filesystem;

std::string probeLine(const Finished& done, const std::string& what) {
  return lineValue(done.out, what + ": ");
}

TEST_F(JailTest, RunsAsTheBoxUidWithNothingElse) {
  JailSpec spec = specFor("a");
  Finished done = probe(spec, {"whoami"});
  ASSERT_TRUE(done.exited(0)) << done.err;
  std::string uid = std::to_string(spec.uid);
  std::string gid = std::to_string(spec.gid);
  EXPECT_EQ(lineValue(done.out, "uid "), uid + " " + uid);
  EXPECT_EQ(lineValue(done.out, "gid "), gid + " " + gid);
  EXPECT_EQ(lineValue(done.out, "groups "), "0");
  for (const char* set : {"CapInh ", "CapPrm ", "CapEff ", "CapBnd ", "CapAmb "}) {
    EXPECT_EQ(lineValue(done.out, set), "0000000000000000") << set;
  }
  EXPECT_EQ(lineValue(done.out, "NoNewPrivs "), "1");
  EXPECT_EQ(lineValue(done.out, "Seccomp "), "2");          // a filter is installed
  EXPECT_EQ(lineValue(done.out, "Seccomp_filters "), "1");  // hutch's (QEMU adds its own)
  EXPECT_EQ(lineValue(done.out, "pid "), "1");              // PID 1 of its own PID namespace
  EXPECT_EQ(lineValue(done.out, "hostname "), "hutch-test-a");
  EXPECT_EQ(lineValue(done.out, "core "), "0");
  EXPECT_EQ(lineValue(done.out, "umask "), "077");
  for (const char* ns : {"mnt", "pid", "ipc", "uts", "net", "cgroup"}) {
    EXPECT_NE(lineValue(done.out, std::string("ns ") + ns + " "), ownNamespace(ns)) << ns;
  }
  // No user namespace: the kernel sees the real, unprivileged uid (see docs/security.md).
  EXPECT_EQ(lineValue(done.out, "ns user "), ownNamespace("user"));
}

TEST_F(JailTest, SeesOnlyItsBoxTheTemplateAndTheSystemFiles) {
  JailSpec spec = specFor("a");
  std::string own_disk = (boxDir("a") / "disk.qcow2").string();
  std::string other_disk = (boxDir("b") / "disk.qcow2").string();
  Finished done = probe(spec, {"read",
                               own_disk,
                               ",",
                               "read",
                               template_.string(),
                               ",",
                               "read",
                               other_disk,
                               ",",
                               "ls",
                               boxDir("b").string(),
                               ",",
                               "read",
                               db_.string(),
                               ",",
                               "connect",
                               socket_.string(),
                               ",",
                               "read",
                               "/etc/shadow",
                               ",",
                               "read",
                               "/etc/passwd",
                               ",",
                               "read",
                               "/root/.bashrc",
                               ",",
                               "ls",
                               "/",
                               ",",
                               "ls",
                               (root_ / "boxes").string(),
                               ",",
                               "ls",
                               "/dev"});
  ASSERT_TRUE(done.exited(0)) << done.err;
  EXPECT_EQ(probeLine(done, "read " + own_disk), "OK");
  EXPECT_EQ(probeLine(done, "read " + template_.string()), "OK");
  EXPECT_EQ(probeLine(done, "read " + other_disk), "ERR ENOENT");
  EXPECT_EQ(probeLine(done, "ls " + boxDir("b").string()), "ERR ENOENT");
  EXPECT_EQ(probeLine(done, "read " + db_.string()), "ERR ENOENT");
  EXPECT_EQ(probeLine(done, "connect " + socket_.string()), "ERR ENOENT");
  EXPECT_EQ(probeLine(done, "read /etc/shadow"), "ERR ENOENT");
  EXPECT_EQ(probeLine(done, "read /etc/passwd"), "ERR ENOENT");
  EXPECT_EQ(probeLine(done, "read /root/.bashrc"), "ERR ENOENT");
  EXPECT_EQ(probeLine(done, "ls " + (root_ / "boxes").string()), "a");
  // The root: the system directories (or merged-/usr links), /etc with the linker cache,
  // /dev, /proc, and the first components of the listed paths (/tmp for this test, /work for
  // the probe binary).
  std::string top = probeLine(done, "ls /");
  std::istringstream words(top);
  std::set<std::string> entries{std::istream_iterator<std::string>(words), {}};
  for (const char* hidden : {"root", "home", "var", "sys", "run", "boot", "srv", "opt", "mnt"}) {
    EXPECT_EQ(entries.count(hidden), 0U) << hidden << " is visible: " << top;
  }
  for (const char* shown : {"usr", "etc", "dev", "proc"}) {
    EXPECT_EQ(entries.count(shown), 1U) << shown << " is missing: " << top;
  }
  EXPECT_EQ(probeLine(done, "ls /dev"), "fd full null random stderr stdin stdout urandom zero");
}

TEST_F(JailTest, WritesOnlyItsBoxAndExecutesNothingFromIt) {
  JailSpec spec = specFor("a");
  fs::copy_file("/usr/bin/true", boxDir("a") / "true");
  ::chown((boxDir("a") / "true").c_str(), spec.uid, spec.gid);
  ::chmod((boxDir("a") / "true").c_str(), 0755);
  std::string own = (boxDir("a") / "new-file").string();
  // Writable by its mode, read-only by its mount.
  fs::path open_file = root_ / "images" / "t1" / "world-writable";
  std::ofstream(open_file) << "x";
  ::chmod(open_file.c_str(), 0666);
  spec.paths.push_back({open_file, BindPath::Access::kReadOnly, false});
  Finished done = probe(spec, {"write",
                               own,
                               ",",
                               "write",
                               open_file.string(),
                               ",",
                               "write",
                               "/usr/hutch-test",
                               ",",
                               "write",
                               "/new-file",
                               ",",
                               "write",
                               "/dev/hutch-test",
                               ",",
                               "exec",
                               (boxDir("a") / "true").string(),
                               ",",
                               "exec",
                               "/usr/bin/true"});
  ASSERT_TRUE(done.exited(0)) << done.err;
  EXPECT_EQ(probeLine(done, "write " + own), "OK");
  EXPECT_EQ(probeLine(done, "write " + open_file.string()), "ERR EROFS");
  EXPECT_EQ(probeLine(done, "write /usr/hutch-test"), "ERR EROFS");
  EXPECT_EQ(probeLine(done, "write /new-file"), "ERR EROFS");
  EXPECT_EQ(probeLine(done, "write /dev/hutch-test"), "ERR EROFS");
  EXPECT_EQ(probeLine(done, "exec " + (boxDir("a") / "true").string()), "ERR EACCES");  // noexec
  EXPECT_EQ(probeLine(done, "exec /usr/bin/true"), "OK");  // QEMU's -sandbox spawn=deny stops it
  struct stat st {};
  ASSERT_EQ(::stat(own.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, spec.uid);
}

TEST_F(JailTest, CannotSignalOrPtraceAnotherBox) {
  JailSpec spec_b = specFor("b");
  Running b = start(spec_b, {HUTCH_JAIL_PROBE, "sleep"});
  ASSERT_NE(readUntil(b, "sleeping").find("sleeping"), std::string::npos);
  std::string pid_b = std::to_string(b.pid);  // its host pid, as hutchd knows it

  JailSpec spec_a = specFor("a");
  Finished done = probe(spec_a, {"signal", pid_b, ",", "ptrace", pid_b, ",", "pidfd", pid_b, ",",
                                 "signal", std::to_string(::getpid()), ",", "killall"});
  ASSERT_TRUE(done.exited(0)) << done.err;
  // Box b's QEMU is not in a's PID namespace: there is no such process to name.
  EXPECT_EQ(probeLine(done, "signal " + pid_b), "ERR ESRCH");
  EXPECT_EQ(probeLine(done, "ptrace " + pid_b), "ERR EPERM");  // seccomp, before the lookup
  EXPECT_EQ(probeLine(done, "pidfd " + pid_b), "ERR ESRCH");
  EXPECT_EQ(probeLine(done, "signal " + std::to_string(::getpid())), "ERR ESRCH");
  EXPECT_EQ(probeLine(done, "killall"), "ERR ESRCH");  // nobody else in its namespace
  // Without hutch's filter the PID namespace alone still hides b: ptrace finds no such process.
  spec_a.seccomp = false;
  Finished open = probe(spec_a, {"ptrace", pid_b, ",", "signal", pid_b});
  ASSERT_TRUE(open.exited(0)) << open.err;
  EXPECT_EQ(probeLine(open, "ptrace " + pid_b), "ERR ESRCH");
  EXPECT_EQ(probeLine(open, "signal " + pid_b), "ERR ESRCH");
  int status = 0;
  EXPECT_EQ(::waitpid(b.pid, &status, WNOHANG), 0) << "box b died";
}

TEST_F(JailTest, UidsSeparateBoxesEvenWithoutPidNamespaces) {
  // Defense in depth: were b's QEMU visible, a's uid still could not signal it.
  JailSpec spec_b = specFor("b");
  Running b = start(spec_b, {HUTCH_JAIL_PROBE, "sleep"});
  ASSERT_NE(readUntil(b, "sleeping").find("sleeping"), std::string::npos);
  ASSERT_EQ(::kill(b.pid, 0), 0);
  JailSpec spec_a = specFor("a");
  pid_t child = ::fork();
  if (child == 0) {
    bool ok = ::setgroups(0, nullptr) == 0 &&
              ::setresgid(spec_a.gid, spec_a.gid, spec_a.gid) == 0 &&
              ::setresuid(spec_a.uid, spec_a.uid, spec_a.uid) == 0;
    ::_exit(!ok ? 2 : (::kill(b.pid, SIGKILL) == -1 && errno == EPERM) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// hutch's filter, told apart from the missing capabilities: every call is made so that without
// the filter the kernel answers differently (it succeeds, or fails on something it checks before
// any capability), and the same list runs in the same jail with the filter off.
TEST_F(JailTest, SeccompDeniesWhatTheKernelWouldOtherwiseAllow) {
  struct Call {
    std::vector<std::string> args;
    std::string filtered;  // with hutch's filter
    std::string open;      // the same jail (no capabilities, the box uid) without it
  };
  const std::vector<Call> calls = {
      {{"unshare"}, "ERR EPERM", "OK"},        // a user namespace
      {{"clone-newuser"}, "ERR EPERM", "OK"},  // the same through clone flags
      {{"clone3"}, "ERR ENOSYS", "OK"},        // flags a filter cannot read: libc falls back
      {{"setns"}, "ERR EPERM", "ERR EBADF"},
      {{"mount"}, "ERR EPERM", "ERR ENOENT"},  // the target is looked up before CAP_SYS_ADMIN
      {{"bpf"}, "ERR EPERM", "ERR EINVAL"},
      {{"keyctl"}, "ERR EPERM", "ERR EOPNOTSUPP"},
      {{"io_uring"}, "ERR EPERM", "OK"},
      {{"userfaultfd"}, "ERR EPERM", "OK"},
      {{"perf"}, "ERR EPERM", "OK"},
      {{"ptrace-child"}, "ERR EPERM", "OK"},  // even its own child
      {{"vmread-child"}, "ERR EPERM", "OK"},
      {{"socket", "inet"}, "ERR EAFNOSUPPORT", "OK"},  // in the jail's own, empty netns
      {{"socket", "netlink"}, "ERR EAFNOSUPPORT", "OK"},
      {{"socket", "unix"}, "OK", "OK"},  // QMP and the agent channel
  };
  std::vector<std::string> args;
  for (const Call& call : calls) {
    if (!args.empty()) args.push_back(",");
    args.insert(args.end(), call.args.begin(), call.args.end());
  }
  JailSpec spec = specFor("a");
  Finished filtered = probe(spec, args);
  ASSERT_TRUE(filtered.exited(0)) << filtered.err;
  spec.seccomp = false;
  Finished open = probe(spec, args);
  ASSERT_TRUE(open.exited(0)) << open.err;
  for (const Call& call : calls) {
    std::string what = call.args[0] + (call.args.size() > 1 ? " " + call.args[1] : "");
    EXPECT_EQ(probeLine(filtered, what), call.filtered) << what << " with the filter";
    EXPECT_EQ(probeLine(open, what), call.open) << what << " without the filter";
    if (call.filtered != "OK") {
      EXPECT_NE(probeLine(open, what), probeLine(filtered, what)) << what;
    }
  }
}

TEST_F(JailTest, ForkBombStopsAtPidsMax) {
  JailSpec spec = specFor("a");
  spec.limits.pids_max = 16;
  spec.max_processes = 0;  // no RLIMIT_NPROC: the cgroup alone must stop it
  Running bomb = start(spec, {HUTCH_JAIL_PROBE, "forkbomb", ",", "sleep"});
  std::string out = readUntil(bomb, "sleeping");
  EXPECT_EQ(lineValue(out, "forkbomb: "), "forked 15 ERR EAGAIN") << out;
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage) << usage.error().describe();
  EXPECT_EQ(usage->pids_current, 16U);
  EXPECT_EQ(usage->pids_max, 16U);
  // hutchd's kill of the jail's PID 1 takes every process in it along.
  ::kill(bomb.pid, SIGKILL);
  Finished done = wait(std::move(bomb));
  EXPECT_TRUE(done.killedBy(SIGKILL));
  auto pids = spec.cgroup->pids();
  ASSERT_TRUE(pids);
  for (int i = 0; i < 100 && !spec.cgroup->pids()->empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(spec.cgroup->pids()->empty());
}

TEST_F(JailTest, MemoryHogIsOomKilledAndReported) {
  JailSpec spec = specFor("a");
  spec.limits.memory_max = 64 << 20;
  Finished done = probe(spec, {"hog", "512"});
  EXPECT_TRUE(done.killedBy(SIGKILL)) << "status " << done.status << ": " << done.out << done.err;
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage) << usage.error().describe();
  EXPECT_GE(usage->oom_kills, 1U);
  EXPECT_EQ(usage->memory_max, uint64_t{64} << 20);
  EXPECT_EQ(oomKillReason(*usage, "QEMU"), "QEMU was killed by the OOM killer (memory.max 64 MiB)");
  // A hog below the limit is fine, and a fresh cgroup does not inherit the old OOM count.
  Finished small = probe(spec, {"hog", "16"});
  EXPECT_TRUE(small.exited(0)) << small.err;
  auto fresh = spec.cgroup->usage();
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->oom_kills, 0U);
  EXPECT_FALSE(oomKillReason(*fresh, "QEMU"));
}

TEST_F(JailTest, CgroupLimitsAndUsageAreVisible) {
  JailSpec spec = specFor("a");
  spec.limits = CgroupLimits::forVm(2, 300, 100);
  Running sleeper = start(spec, {HUTCH_JAIL_PROBE, "sleep"});
  ASSERT_NE(readUntil(sleeper, "sleeping").find("sleeping"), std::string::npos);
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage) << usage.error().describe();
  EXPECT_EQ(usage->memory_max, uint64_t{400} << 20);
  EXPECT_GT(usage->memory_current, 0U);
  EXPECT_EQ(usage->pids_current, 1U);
  EXPECT_EQ(usage->pids_max, 130U);
  auto pids = spec.cgroup->pids();
  ASSERT_TRUE(pids);
  EXPECT_EQ(*pids, std::vector<pid_t>{sleeper.pid});
  if (auto cpu = spec.cgroup->dirFor("cpu"); cpu && spec.cgroup->version == CgroupVersion::kV1) {
    std::ifstream quota(*cpu / "cpu.cfs_quota_us");
    uint64_t value = 0;
    quota >> value;
    EXPECT_EQ(value, 200000U);
  }
  // While it runs, the cgroup cannot be removed or re-created.
  EXPECT_FALSE(spec.cgroup->create());
  ::kill(sleeper.pid, SIGKILL);
  Finished done = wait(std::move(sleeper));
  EXPECT_TRUE(done.killedBy(SIGKILL));
  EXPECT_TRUE(spec.cgroup->remove());
}

TEST_F(JailTest, RefusesAUidThatIsStillInUse) {
  JailSpec spec = specFor("a");
  Running first = start(spec, {HUTCH_JAIL_PROBE, "sleep"});
  ASSERT_NE(readUntil(first, "sleeping").find("sleeping"), std::string::npos);
  JailSpec again = specFor("b");
  again.uid = spec.uid;
  again.gid = spec.gid;
  Finished done = probe(again, {"whoami"});
  EXPECT_TRUE(done.exited(kExitJailFailed)) << done.status;
  EXPECT_NE(done.err.find("uid " + std::to_string(spec.uid) + " is held by another jail"),
            std::string::npos)
      << done.err;
}

std::string uidLockFile(uid_t uid) {
  return std::string(kUidLockDir) + "/uid-" + std::to_string(uid) + ".lock";
}

// The scan of /proc is check-then-act; the per-uid lock is what two jails racing for one uid
// meet. It is held by the jailed program itself, so exactly as long as it lives, and a held lock
// refuses a jail even when no process runs with the uid (where the scan alone would let it in).
TEST_F(JailTest, TheUidLockIsHeldAsLongAsTheProgramLives) {
  JailSpec spec = specFor("a");
  Running first = start(spec, {HUTCH_JAIL_PROBE, "sleep"});
  ASSERT_NE(readUntil(first, "sleeping").find("sleeping"), std::string::npos);
  UniqueFd lock(::open(uidLockFile(spec.uid).c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(lock) << uidLockFile(spec.uid);
  struct stat st {};
  ASSERT_EQ(::fstat(lock.get(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);
  EXPECT_EQ(st.st_mode & 07777, 0600U);
  EXPECT_EQ(::flock(lock.get(), LOCK_EX | LOCK_NB), -1);
  EXPECT_EQ(errno, EWOULDBLOCK);
  ::kill(first.pid, SIGKILL);
  EXPECT_TRUE(wait(std::move(first)).killedBy(SIGKILL));
  ASSERT_EQ(::flock(lock.get(), LOCK_EX | LOCK_NB), 0);  // released with the program

  // Held here, by a process that is not of the uid: the jail is refused all the same.
  ASSERT_TRUE(processesWithUid(spec.uid)->empty());
  Finished refused = probe(spec, {"whoami"});
  EXPECT_TRUE(refused.exited(kExitJailFailed)) << refused.status;
  EXPECT_NE(refused.err.find("is held by another jail (" + uidLockFile(spec.uid) + " is locked)"),
            std::string::npos)
      << refused.err;
  ASSERT_EQ(::flock(lock.get(), LOCK_UN), 0);
  Finished runs = probe(spec, {"whoami"});
  EXPECT_TRUE(runs.exited(0)) << runs.err;
}

// A process of the uid outside any jail (nothing holds the lock) is found by the scan.
TEST_F(JailTest, RefusesAUidAProcessOutsideAnyJailStillUses) {
  JailSpec spec = specFor("a");
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  pid_t child = ::fork();
  if (child == 0) {
    bool ok = ::setgroups(0, nullptr) == 0 && ::setresgid(spec.gid, spec.gid, spec.gid) == 0 &&
              ::setresuid(spec.uid, spec.uid, spec.uid) == 0;
    if (::write(ready[1], ok ? "y" : "n", 1) != 1 || !ok) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char answer = 0;
  ASSERT_EQ(::read(ready[0], &answer, 1), 1);
  ::close(ready[0]);
  started_.push_back(child);  // killed on teardown
  ASSERT_EQ(answer, 'y');
  Finished done = probe(spec, {"whoami"});
  EXPECT_TRUE(done.exited(kExitJailFailed)) << done.status;
  EXPECT_NE(done.err.find("is still used by host pid " + std::to_string(child)), std::string::npos)
      << done.err;
}

// A jail without a cgroup would have no memory, CPU or task limit: hutch-jail refuses it unless
// the spec says it is a test.
TEST_F(JailTest, ASpecWithoutACgroupIsRefused) {
  JailSpec spec = specFor("a");
  spec.cgroup.reset();
  Finished refused = probe(spec, {"whoami"});
  EXPECT_TRUE(refused.exited(kExitJailFailed)) << refused.status;
  EXPECT_NE(refused.err.find("The jail spec has no cgroup"), std::string::npos) << refused.err;
  spec.allow_no_cgroup = true;
  Finished runs = probe(spec, {"whoami"});
  EXPECT_TRUE(runs.exited(0)) << runs.err;
}

// /proc in the jail: its own PID namespace only, and nothing of the kernel to write. With
// subset=pid (Linux 5.8+) there is no /proc/sys at all; the fallback for older kernels
// (hidepid=2) keeps /proc/sys and friends read-only.
TEST_F(JailTest, ProcShowsOnlyTheJailAndNothingToWrite) {
  for (bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "hidepid=2 fallback" : "subset=pid");
    JailSpec spec = specFor("a");
    spec.legacy_proc = legacy;
    Finished done = probe(spec, {"ls", "/proc", ",", "write", "/proc/sys/kernel/domainname", ",",
                                 "mountopts", "/proc", ",", "mountopts", "/proc/sys", ",",
                                 "mountopts", "/proc/fs", ",", "read", "/proc/self/status"});
    ASSERT_TRUE(done.exited(0)) << done.err;
    std::istringstream words(probeLine(done, "ls /proc"));
    std::vector<std::string> pids;
    for (std::string word; words >> word;) {
      if (word.find_first_not_of("0123456789") == std::string::npos) pids.push_back(word);
    }
    EXPECT_EQ(pids, std::vector<std::string>{"1"});  // only the probe itself
    EXPECT_EQ(probeLine(done, "read /proc/self/status"), "OK");
    std::string proc = probeLine(done, "mountopts /proc");
    EXPECT_EQ(proc.rfind("rw,nosuid,nodev,noexec", 0), 0U) << proc;
    if (!legacy) {
      EXPECT_EQ(probeLine(done, "ls /proc"), "1 self thread-self");
      EXPECT_EQ(probeLine(done, "write /proc/sys/kernel/domainname"), "ERR ENOENT");
      EXPECT_EQ(probeLine(done, "mountopts /proc/sys"), "(not a mount point)");
    } else {
      EXPECT_NE(probeLine(done, "ls /proc").find(" sys "), std::string::npos);
      EXPECT_EQ(probeLine(done, "write /proc/sys/kernel/domainname").rfind("ERR ", 0), 0U);
      // Read-only mounts of their own, whatever a file's mode says (this kernel has no
      // /proc/sysrq-trigger; /proc/irq, /proc/bus likewise where present).
      for (const char* path : {"/proc/sys", "/proc/fs"}) {
        std::string opts = probeLine(done, std::string("mountopts ") + path);
        EXPECT_EQ(opts.rfind("ro,nosuid,nodev,noexec", 0), 0U) << path << ": " << opts;
      }
    }
  }
}

// The io weight lands in every weight file the kernel offers for the box's cgroup (this v1
// host: blkio.bfq.weight), reads back in usage(), and hutch-jail says so where there is none.
TEST_F(JailTest, IoWeightIsWrittenWhereverTheKernelOffersOne) {
  JailSpec spec = specFor("a");
  spec.limits.io_weight = 300;  // not any kernel default
  Running sleeper = start(spec, {HUTCH_JAIL_PROBE, "sleep"});
  ASSERT_NE(readUntil(sleeper, "sleeping").find("sleeping"), std::string::npos);
  std::map<std::string, uint64_t> expected;
  if (auto dir = spec.cgroup->dirFor("io")) {
    for (const std::string& file : ioWeightFiles(spec.cgroup->version)) {
      if (fs::exists(*dir / file)) expected[file] = file == "blkio.weight" ? 1000 : 300;
    }
  }
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage) << usage.error().describe();
  EXPECT_EQ(usage->io_weights, expected);
  ::kill(sleeper.pid, SIGKILL);
  Finished done = wait(std::move(sleeper));
  if (expected.empty()) {
    EXPECT_NE(done.err.find("warning: No io weight"), std::string::npos) << done.err;
  } else {
    EXPECT_EQ(done.err.find("No io weight"), std::string::npos) << done.err;
  }
  std::printf("io weights applied here:");
  for (const auto& [file, weight] : expected)
    std::printf(" %s=%llu", file.c_str(), (unsigned long long)weight);
  std::printf("%s\n", expected.empty() ? " none" : "");
}

TEST_F(JailTest, MustBePidOneOfANewPidNamespace) {
  JailSpec spec = specFor("a");
  Finished done = wait(start(spec, {HUTCH_JAIL_PROBE, "whoami"}, 0));
  EXPECT_TRUE(done.exited(kExitJailFailed)) << done.status;
  EXPECT_NE(done.err.find("must be PID 1 of a new PID namespace"), std::string::npos) << done.err;
}

TEST_F(JailTest, ClearErrorsForBadPathsAndPrograms) {
  JailSpec spec = specFor("a");
  spec.paths.push_back({root_ / "images" / "missing", BindPath::Access::kReadOnly, false});
  Finished missing = probe(spec, {"whoami"});
  EXPECT_TRUE(missing.exited(kExitJailFailed));
  EXPECT_NE(missing.err.find("Cannot expose " + (root_ / "images" / "missing").string()),
            std::string::npos)
      << missing.err;

  // A path under a directory the box (or anyone but root) could change is refused.
  JailSpec swapped = specFor("a");
  fs::create_directories(boxDir("a") / "frozen");
  std::ofstream(boxDir("a") / "frozen" / "layer") << "x";
  swapped.paths.push_back({boxDir("a") / "frozen" / "layer", BindPath::Access::kReadOnly, false});
  ASSERT_TRUE(prepareBoxDir(boxDir("a"), BoxIds{swapped.uid, swapped.gid}));
  Finished refused = probe(swapped, {"whoami"});
  EXPECT_TRUE(refused.exited(kExitJailFailed));
  EXPECT_NE(refused.err.find("Refusing to expose"), std::string::npos) << refused.err;

  JailSpec plain = specFor("b");
  Finished not_found = run(plain, {"/usr/bin/hutch-no-such-program"});
  EXPECT_TRUE(not_found.exited(kExitNotFound)) << not_found.status << not_found.err;
  Finished not_shown = run(plain, {"/sbin/hutch-not-here"});
  EXPECT_TRUE(not_shown.exited(kExitNotFound));
}

}  // namespace
}  // namespace hutch::jail::test

// The jail, proven with a probe run exactly as QEMU would be: what it can see, who it is, what it
// can do to other boxes, and where the cgroup stops it.
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
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
  EXPECT_EQ(lineValue(done.out, "Seccomp "), "2");  // a filter is installed
  EXPECT_EQ(lineValue(done.out, "pid "), "1");      // PID 1 of its own PID namespace
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

TEST_F(JailTest, SeccompDeniesKernelSurfaceQemuDoesNotNeed) {
  JailSpec spec = specFor("a");
  Finished done =
      probe(spec, {"unshare", ",", "mount", ",", "bpf", ",", "io_uring", ",", "keyctl", ",",
                   "socket", "inet", ",", "socket", "netlink", ",", "socket", "unix"});
  ASSERT_TRUE(done.exited(0)) << done.err;
  EXPECT_EQ(probeLine(done, "unshare"), "ERR EPERM");
  EXPECT_EQ(probeLine(done, "mount"), "ERR EPERM");
  EXPECT_EQ(probeLine(done, "bpf"), "ERR EPERM");
  EXPECT_EQ(probeLine(done, "io_uring"), "ERR EPERM");
  EXPECT_EQ(probeLine(done, "keyctl"), "ERR EPERM");
  EXPECT_EQ(probeLine(done, "socket inet"), "ERR EAFNOSUPPORT");
  EXPECT_EQ(probeLine(done, "socket netlink"), "ERR EAFNOSUPPORT");
  EXPECT_EQ(probeLine(done, "socket unix"), "OK");

  // Without hutch's filter the same calls reach the kernel (and fail or not on their own).
  spec.seccomp = false;
  Finished open = probe(spec, {"socket", "inet", ",", "io_uring"});
  ASSERT_TRUE(open.exited(0)) << open.err;
  EXPECT_EQ(probeLine(open, "socket inet"), "OK");  // in the jail's own, empty netns
  EXPECT_NE(probeLine(open, "io_uring"), "ERR EPERM");
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
  EXPECT_NE(done.err.find("is still used by host pid " + std::to_string(first.pid)),
            std::string::npos)
      << done.err;
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

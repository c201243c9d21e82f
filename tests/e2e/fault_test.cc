// kill -9 of hutchd at named steps of box operations (issue 18.3; src/base/fault.h): hutchd
// runs with HUTCH_FAULT_POINTS naming one step, is killed there by its own hand, and a new
// hutchd on the same state must find the box in a state a user can act on, with nothing lost
// that the operation had not yet promised to change: its files, its processes (a suspended
// box's memory), its checkpoints. Then rm -f leaves no QEMU, directory or snapshot behind.
// QemuKilledTest kills the box's QEMU at the same points instead (NAME:qemu) while hutchd goes on,
// EgressKilledTest hutch-egress (NAME:egress).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;

class FaultTest : public ::testing::Test {
 protected:
  void TearDown() override { daemon_.reset(); }
  Daemon& d() { return *daemon_; }

  // hutchd with HUTCH_FAULT_POINTS=spec in its environment; its restarts run without it.
  void startWith(const std::string& spec) {
    ::setenv("HUTCH_FAULT_POINTS", spec.c_str(), 1);
    daemon_ = std::make_unique<Daemon>();
    ::unsetenv("HUTCH_FAULT_POINTS");
  }

  // `hutch ARGS` during which hutchd kills itself at its fault point; then a new hutchd on the
  // same state.
  void killedDuring(const std::vector<std::string>& args) {
    auto r = d().hutch(args);
    EXPECT_NE(r.exit_code, 0) << "hutch " << args[0] << " succeeded: hutchd was not killed";
    EXPECT_TRUE(eventually([&] { return !processAlive(d().pid()); }))
        << "hutchd still runs after hutch " << args[0];
    EXPECT_NE(readFile(d().dir() / "hutchd.log").find("killed by HUTCH_FAULT_POINTS"),
              std::string::npos);
    d().crashAndRestart();
  }

  void run(const std::string& name) {
    auto r = d().hutch({"run", "--name", name});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // A file on the disk (kept by every stop) and one in RAM (kept only while the VM's memory is).
  void mark(const std::string& box, const std::string& text) {
    auto r = d().hutch(
        {"exec", box, "--", "sh", "-c",
         "echo " + text + " > /home/hutch/disk-mark; echo " + text + " > /dev/shm/ram-mark; sync"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  std::string cat(const std::string& box, const std::string& path) {
    auto r = d().hutch({"exec", box, "--", "cat", path});
    return r.exit_code == 0 ? r.out : "(exit " + std::to_string(r.exit_code) + ": " + r.err + ")";
  }

  std::string stateOf(const std::string& box) {
    auto j = d().inspect(box);
    return j.is_object() ? j.value("state", "") : "(gone)";
  }

  // A box left by an interrupted operation is running, stopped, suspended or failed (never
  // stuck creating or stopping), and `hutch start` brings up whatever is not running.
  void expectUsable(const std::string& box) {
    const std::string state = stateOf(box);
    EXPECT_TRUE(state == "running" || state == "stopped" || state == "suspended" ||
                state == "failed")
        << box << " is " << state << " after the restart: " << d().inspect(box).dump();
    if (state != "running") {
      auto r = d().hutch({"start", box});
      ASSERT_EQ(r.exit_code, 0) << "start " << box << " (was " << state << "): " << r.err;
    }
    auto r = d().hutch({"exec", box, "--", "echo", "answers"});
    EXPECT_EQ(r.out, "answers\n") << r.err;
  }

  std::vector<std::string> entries(const fs::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

  // rm -f removes the box with its QEMU and its directory.
  void expectRemovedCleanly(const std::string& box) {
    auto j = d().inspect(box);
    ASSERT_TRUE(j.is_object()) << box;
    const std::string id = j.value("id", "");
    auto r = d().hutch({"rm", "-f", box});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expectNothingLeftOf(box, id);
  }

  // No QEMU, directory, jail cgroup or egress file of box `id` is left.
  void expectNothingLeftOf(const std::string& box, const std::string& id) {
    EXPECT_TRUE(eventually([&] { return pidsMentioning(id).empty(); }))
        << "a QEMU of " << box << " outlived its removal";
    EXPECT_TRUE(eventually([&] { return !fs::exists(d().stateDir() / "boxes" / id); }))
        << "the directory of " << box << " outlived its removal";
    EXPECT_TRUE(eventually([&] { return boxCgroupsOf(id).empty(); }))
        << "a jail cgroup of " << box << " outlived its removal";
    EXPECT_TRUE(eventually([&] { return !fs::exists(d().stateDir() / "egress/boxes" / id); }))
        << "the egress files of " << box << " outlived its removal";
  }

  std::unique_ptr<Daemon> daemon_;
};

// Create, killed once the VM runs and again once its agent answered: the box is failed (its
// VM killed by the next hutchd), and start boots it from its disk.
TEST_F(FaultTest, CreateKilledAtEachBootStep) {
  for (const char* point : {"boot.vm-launched", "boot.agent-ready"}) {
    SCOPED_TRACE(point);
    startWith(point);
    killedDuring({"run", "--name", "born"});
    EXPECT_EQ(stateOf("born"), "failed");
    expectUsable("born");
    expectRemovedCleanly("born");
    daemon_.reset();
  }
}

// A cold start (after stop --shutdown) killed while booting: failed, then start works and the
// disk has what was written before.
TEST_F(FaultTest, StartKilledWhileBooting) {
  startWith("boot.vm-launched@2");
  run("cold");
  mark("cold", "before");
  ASSERT_EQ(d().hutch({"stop", "--shutdown", "cold"}).exit_code, 0);
  killedDuring({"start", "cold"});
  expectUsable("cold");
  EXPECT_EQ(cat("cold", "/home/hutch/disk-mark"), "before\n");
  expectRemovedCleanly("cold");
}

// A resume killed once its QEMU runs: still suspended (the saved state is complete and
// recorded), and the next start resumes it with its memory.
TEST_F(FaultTest, ResumeKilledKeepsTheBoxSuspended) {
  startWith("boot.vm-launched@2");
  run("sleeper");
  mark("sleeper", "asleep");
  ASSERT_EQ(d().hutch({"stop", "sleeper"}).exit_code, 0);
  killedDuring({"start", "sleeper"});
  EXPECT_EQ(stateOf("sleeper"), "suspended");
  expectUsable("sleeper");
  EXPECT_EQ(cat("sleeper", "/dev/shm/ram-mark"), "asleep\n") << "the suspended memory was lost";
  expectRemovedCleanly("sleeper");
}

// A suspend killed after its state is recorded, while the paused QEMU still runs: the next
// hutchd takes the VM back and resumes it; the unfinished suspend is forgotten.
TEST_F(FaultTest, SuspendKilledKeepsTheBoxRunning) {
  startWith("suspend.state-recorded");
  run("napper");
  mark("napper", "awake");
  killedDuring({"stop", "napper"});
  EXPECT_EQ(stateOf("napper"), "running");
  expectUsable("napper");
  EXPECT_EQ(cat("napper", "/dev/shm/ram-mark"), "awake\n");
  // It suspends and resumes normally afterwards.
  ASSERT_EQ(d().hutch({"stop", "napper"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"start", "napper"}).exit_code, 0);
  EXPECT_EQ(cat("napper", "/dev/shm/ram-mark"), "awake\n");
  expectRemovedCleanly("napper");
}

// A checkpoint killed with the disk frozen and the VM paused, and one killed with its files
// written but not recorded: the box runs on with its memory and disk, the checkpoint is not
// listed, its files are gone, and the next checkpoint and a rollback to it work.
TEST_F(FaultTest, CheckpointKilledLeavesNoHalfCheckpoint) {
  for (const char* point : {"capture.disk-frozen", "checkpoint.saved"}) {
    SCOPED_TRACE(point);
    startWith(point);
    run("saver");
    mark("saver", "kept");
    const auto snapshots_before = entries(d().stateDir() / "snapshots");
    killedDuring({"checkpoint", "--name", "half", "saver"});
    EXPECT_EQ(stateOf("saver"), "running");
    expectUsable("saver");
    EXPECT_EQ(cat("saver", "/dev/shm/ram-mark"), "kept\n");
    auto listed = d().hutch({"checkpoint", "ls", "saver"});
    EXPECT_EQ(listed.out.find("half"), std::string::npos) << listed.out;
    EXPECT_EQ(entries(d().stateDir() / "snapshots"), snapshots_before)
        << "the interrupted checkpoint left its files behind";
    ASSERT_EQ(d().hutch({"checkpoint", "--name", "whole", "saver"}).exit_code, 0);
    ASSERT_EQ(d().hutch({"exec", "saver", "--", "rm", "/home/hutch/disk-mark"}).exit_code, 0);
    auto back = d().hutch({"rollback", "saver", "whole"});
    ASSERT_EQ(back.exit_code, 0) << back.err;
    EXPECT_EQ(cat("saver", "/home/hutch/disk-mark"), "kept\n");
    expectRemovedCleanly("saver");
    daemon_.reset();
  }
}

// A rollback killed while the checkpoint's VM boots: the box can be started, and it has the
// checkpoint's disk.
TEST_F(FaultTest, RollbackKilledWhileBooting) {
  startWith("boot.vm-launched@2");
  run("rewinder");
  mark("rewinder", "checkpointed");
  ASSERT_EQ(d().hutch({"checkpoint", "--name", "good", "rewinder"}).exit_code, 0);
  mark("rewinder", "later");
  killedDuring({"rollback", "rewinder", "good"});
  expectUsable("rewinder");
  EXPECT_EQ(cat("rewinder", "/home/hutch/disk-mark"), "checkpointed\n");
  EXPECT_NE(d().hutch({"checkpoint", "ls", "rewinder"}).out.find("good"), std::string::npos);
  expectRemovedCleanly("rewinder");
}

// A fork killed with the parent's disk frozen and the parent paused: the parent runs on with
// its memory; whatever child was recorded can be started or removed.
TEST_F(FaultTest, ForkKilledLeavesTheParentRunning) {
  startWith("capture.disk-frozen");
  run("parent");
  mark("parent", "mine");
  killedDuring({"fork", "--name", "child", "parent"});
  EXPECT_EQ(stateOf("parent"), "running");
  expectUsable("parent");
  EXPECT_EQ(cat("parent", "/dev/shm/ram-mark"), "mine\n");
  if (d().inspect("child").is_object()) expectUsable("child");
  auto again = d().hutch({"fork", "--name", "child2", "parent"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(cat("child2", "/dev/shm/ram-mark"), "mine\n");
  for (const char* box : {"child", "child2"}) {
    if (d().inspect(box).is_object()) expectRemovedCleanly(box);
  }
  expectRemovedCleanly("parent");
}

// rm killed after the box's record is gone: the next hutchd kills its QEMU and deletes its
// directory (nothing of it is left), and the name is free again.
TEST_F(FaultTest, RemoveKilledLeavesNothingBehind) {
  startWith("remove.recorded");
  run("doomed");
  const std::string id = d().inspect("doomed").value("id", "");
  ASSERT_FALSE(id.empty());
  killedDuring({"rm", "-f", "doomed"});
  EXPECT_EQ(d().inspect("doomed"), nullptr);
  expectNothingLeftOf("doomed", id);
  run("doomed");
  expectRemovedCleanly("doomed");
}

// The first create of a template makes its snapshot with a VM of its own: hutchd killed while
// that VM runs, or once the snapshot's files are written but not recorded. The new hutchd kills
// the template VM and deletes the unrecorded files; the box is failed (start says to remove it:
// it has no disk yet); the next create makes the snapshot again.
TEST_F(FaultTest, TemplateSnapshotKilledLeavesNoVmOrFiles) {
  for (const char* point : {"template.vm-booted", "template.snapshot-saved"}) {
    SCOPED_TRACE(point);
    startWith(point);
    const fs::path snapshots = d().stateDir() / "snapshots";
    killedDuring({"run", "--name", "first"});
    EXPECT_TRUE(eventually([&] { return pidsMentioning(snapshots.string()).empty(); }))
        << "a template VM outlived the restart";
    EXPECT_TRUE(eventually([&] { return entries(snapshots).empty(); }))
        << "unrecorded snapshot files stayed: " << ::testing::PrintToString(entries(snapshots));
    // Its disk was not made yet: start says so and what to do.
    EXPECT_EQ(stateOf("first"), "failed");
    auto start = d().hutch({"start", "first"});
    EXPECT_EQ(start.exit_code, 65);
    EXPECT_NE(start.err.find("remove it and run a new one"), std::string::npos) << start.err;
    run("second");
    EXPECT_EQ(entries(snapshots).size(), 1u) << "no template snapshot was made again";
    expectRemovedCleanly("first");
    expectRemovedCleanly("second");
    daemon_.reset();
  }
}

// `template create --from` killed with the box's disk flattened into <dir>.tmp, or renamed to
// <dir> before a template names it: the new hutchd removes the unused copy (it may be gigabytes),
// there is no template, and creating it again works.
TEST_F(FaultTest, TemplateCreateKilledLeavesNoImage) {
  for (const char* point : {"template.image-copied", "template.image-written"}) {
    SCOPED_TRACE(point);
    startWith(point);
    run("src");
    ASSERT_EQ(
        d().hutch({"exec", "src", "--", "sh", "-c", "echo frozen > /home/hutch/t; sync"}).exit_code,
        0);
    ASSERT_EQ(d().hutch({"stop", "--shutdown", "src"}).exit_code, 0);
    const fs::path images = d().stateDir() / "images";
    std::vector<std::string> before;
    for (const std::string& name : entries(images)) {
      if (fs::is_directory(images / name)) before.push_back(name);
    }
    killedDuring({"template", "create", "--from", "src", "frozen"});
    std::vector<std::string> after;
    for (const std::string& name : entries(images)) {
      if (fs::is_directory(images / name)) after.push_back(name);
    }
    EXPECT_EQ(after, before) << "the interrupted create left its copy";
    EXPECT_EQ(d().hutch({"template", "ls"}).out.find("frozen"), std::string::npos);
    auto made = d().hutch({"template", "create", "--from", "src", "frozen"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    auto r = d().hutch({"run", "--name", "copy", "--template", "frozen"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(cat("copy", "/home/hutch/t"), "frozen\n");
    expectRemovedCleanly("copy");
    expectRemovedCleanly("src");
    ASSERT_EQ(d().hutch({"template", "rm", "frozen"}).exit_code, 0);
    daemon_.reset();
  }
}

// `template build` with hutchd killed half-way through the builder, in mmdebstrap (the chroot's
// proc, sys and devpts mounted): the builder is not hutchd's to lose. It runs to its end and
// cleans up after itself; the restarted hutchd has no template of that name; building it again
// waits for that build and takes its image from the cache; a box boots from it. Then nothing of
// the build is left: no builder, no mount, no half-made file in the cache. (Fed a pipe, the
// builder died of SIGPIPE with hutchd and left mmdebstrap's chroot mounted under /tmp.)
TEST_F(FaultTest, TemplateBuildKilledLetsTheBuilderFinish) {
  char tmpl[] = "/tmp/hutch-build-kill-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path work = tmpl;
  const fs::path recipe = work / "recipes" / "tiny";
  const fs::path cache = work / "cache";
  fs::create_directories(recipe);
  fs::create_directories(cache);
  // Small, and a cache of its own: the build really runs in every run of the test.
  std::ofstream(recipe / "packages") << "jq\n";
  std::ofstream(recipe / "setup.sh") << "useradd --uid 1000 --user-group --create-home hutch\n";
  daemon_ = std::make_unique<Daemon>(std::vector<std::string>{
      "--recipes", (work / "recipes").string(), "--image-cache", cache.string()});
  const fs::path log = d().stateDir() / "images" / "build-tiny.log";
  pid_t cli = d().start({"template", "build", "tiny"}, work / "build.out", work / "build.err");
  ASSERT_TRUE(eventually([&] { return readFile(log).find("I: extracting") != std::string::npos; },
                         std::chrono::seconds(600)))
      << "the build did not reach mmdebstrap:\n"
      << readFile(log);
  d().crashAndRestart();
  auto killed = collect(cli, work / "build.out", work / "build.err");
  EXPECT_NE(killed.exit_code, 0) << "the build finished before hutchd was killed";
  // The CLI showed the build's progress as it came (it read 64 KiB at a time before).
  EXPECT_NE(killed.err.find("rootfs: mmdebstrap"), std::string::npos) << killed.err;
  EXPECT_FALSE(pidsMentioning(recipe.string()).empty()) << "the builder did not outlive hutchd";
  EXPECT_EQ(d().hutch({"template", "ls"}).out.find("tiny"), std::string::npos);
  const std::string first_log = readFile(log);  // the next build starts the log again

  auto again = d().hutch({"template", "build", "tiny"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  // It waited for the first builder's root filesystem and took it from the cache, instead of
  // running mmdebstrap itself. (The first builder's last lines are in its output too: both
  // write to the template's build log.)
  const std::string said = again.out + again.err;
  EXPECT_NE(said.find("waiting for another build of tiny"), std::string::npos) << said;
  EXPECT_NE(said.find("rootfs: cached ("), std::string::npos) << said;
  EXPECT_EQ(said.find("(minbase,"), std::string::npos) << said;
  ASSERT_EQ(d().hutch({"run", "--name", "t", "--template", "tiny"}).exit_code, 0);
  auto jq = d().hutch({"exec", "t", "--", "jq", "--version"});
  EXPECT_EQ(jq.out.rfind("jq-", 0), 0u) << jq.out << jq.err;

  // mmdebstrap says which temporary directory it used; it is gone, and nothing is mounted in it.
  EXPECT_TRUE(eventually([&] { return pidsMentioning(recipe.string()).empty(); }));
  const std::string mounts = readFile("/proc/mounts");
  EXPECT_EQ(mounts.find("/mmdebstrap."), std::string::npos) << mounts;
  const std::string using_dir = "I: using ";
  const size_t at = first_log.find(using_dir + "/tmp/mmdebstrap.");
  ASSERT_NE(at, std::string::npos) << first_log;
  const size_t from = at + using_dir.size();
  const std::string tempdir = first_log.substr(from, first_log.find(' ', from) - from);
  EXPECT_FALSE(fs::exists(tempdir)) << tempdir;
  std::vector<std::string> half_made;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (e.path().filename().string().starts_with(".tmp-")) half_made.push_back(e.path());
  }
  EXPECT_TRUE(half_made.empty()) << half_made.front();
  expectRemovedCleanly("t");
  ASSERT_EQ(d().hutch({"template", "rm", "tiny"}).exit_code, 0);
  daemon_.reset();
  fs::remove_all(work);
}

// The box's QEMU killed with SIGKILL at a step while hutchd goes on, as the OOM killer or a
// crash of QEMU would do it (HUTCH_FAULT_POINTS=NAME:qemu).
class QemuKilledTest : public FaultTest {
 protected:
  // `hutch ARGS` during which the box's QEMU is killed at the named point; hutchd lives on.
  CommandResult qemuKilledDuring(const std::vector<std::string>& args) {
    auto r = d().hutch(args);
    EXPECT_TRUE(processAlive(d().pid())) << "hutchd died during hutch " << args[0];
    EXPECT_NE(readFile(d().dir() / "hutchd.log").find("QEMU (pid"), std::string::npos)
        << "no QEMU was killed during hutch " << args[0];
    return r;
  }

  // The box is failed, with a reason, once hutchd noticed its VM is gone.
  void expectFailedWithAReason(const std::string& box) {
    EXPECT_TRUE(eventually([&] { return stateOf(box) == "failed"; }))
        << box << " is " << stateOf(box);
    EXPECT_FALSE(d().inspect(box).value("reason", "").empty()) << d().inspect(box).dump();
  }
};

// Create and a cold start: the command fails or the box fails right after it; start boots it
// from its disk with what was written before.
TEST_F(QemuKilledTest, WhileBooting) {
  for (const char* spec : {"boot.vm-launched:qemu", "boot.agent-ready:qemu"}) {
    SCOPED_TRACE(spec);
    startWith(spec);
    qemuKilledDuring({"run", "--name", "born"});
    expectFailedWithAReason("born");
    expectUsable("born");
    expectRemovedCleanly("born");
    daemon_.reset();
  }
  startWith("boot.vm-launched@2:qemu");
  run("cold");
  mark("cold", "before");
  ASSERT_EQ(d().hutch({"stop", "--shutdown", "cold"}).exit_code, 0);
  auto r = qemuKilledDuring({"start", "cold"});
  EXPECT_NE(r.exit_code, 0) << "start succeeded with its QEMU killed";
  expectFailedWithAReason("cold");
  expectUsable("cold");
  EXPECT_EQ(cat("cold", "/home/hutch/disk-mark"), "before\n");
  expectRemovedCleanly("cold");
}

// A resume whose QEMU dies: the box boots cold from its disk and says why. (The memory is given
// up: a VM that died after its vCPUs ran may have written to the disk since the state was saved,
// and that state no longer matches the disk.)
TEST_F(QemuKilledTest, WhileResuming) {
  startWith("boot.vm-launched@2:qemu");
  run("sleeper");
  mark("sleeper", "asleep");
  ASSERT_EQ(d().hutch({"stop", "sleeper"}).exit_code, 0);
  auto r = qemuKilledDuring({"start", "sleeper"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(stateOf("sleeper"), "running");
  EXPECT_NE(d().inspect("sleeper").value("boot", "").find("cold boot"), std::string::npos)
      << d().inspect("sleeper").dump();
  EXPECT_EQ(cat("sleeper", "/home/hutch/disk-mark"), "asleep\n");
  expectRemovedCleanly("sleeper");
}

// A checkpoint whose QEMU dies with the disk frozen fails and leaves no half checkpoint; one
// whose QEMU dies once its files are written is kept whole: a rollback to it brings back its
// memory. Either way the box is failed and start boots it with its disk.
TEST_F(QemuKilledTest, WhileCheckpointing) {
  startWith("capture.disk-frozen:qemu");
  run("saver");
  mark("saver", "kept");
  const auto snapshots_before = entries(d().stateDir() / "snapshots");
  auto r = qemuKilledDuring({"checkpoint", "--name", "half", "saver"});
  EXPECT_NE(r.exit_code, 0) << "the checkpoint succeeded without its VM";
  expectFailedWithAReason("saver");
  EXPECT_EQ(d().hutch({"checkpoint", "ls", "saver"}).out.find("half"), std::string::npos);
  EXPECT_EQ(entries(d().stateDir() / "snapshots"), snapshots_before)
      << "the failed checkpoint left its files behind";
  expectUsable("saver");
  EXPECT_EQ(cat("saver", "/home/hutch/disk-mark"), "kept\n");
  expectRemovedCleanly("saver");
  daemon_.reset();

  startWith("checkpoint.saved:qemu");
  run("saver");
  mark("saver", "saved");
  r = qemuKilledDuring({"checkpoint", "--name", "whole", "saver"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  expectFailedWithAReason("saver");
  auto back = d().hutch({"rollback", "saver", "whole"});
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(cat("saver", "/dev/shm/ram-mark"), "saved\n") << "the checkpoint lost its memory";
  expectRemovedCleanly("saver");
}

// A fork whose parent's QEMU dies with the disk frozen: no child runs, the parent is failed and
// starts with its disk.
TEST_F(QemuKilledTest, WhileForking) {
  startWith("capture.disk-frozen:qemu");
  run("parent");
  mark("parent", "mine");
  auto r = qemuKilledDuring({"fork", "--name", "child", "parent"});
  EXPECT_NE(r.exit_code, 0) << "the fork succeeded without its parent's VM";
  expectFailedWithAReason("parent");
  if (d().inspect("child").is_object()) {
    EXPECT_NE(stateOf("child"), "running");
    expectRemovedCleanly("child");
  }
  expectUsable("parent");
  EXPECT_EQ(cat("parent", "/home/hutch/disk-mark"), "mine\n");
  expectRemovedCleanly("parent");
}

// A template snapshot whose VM dies: the create goes on with a cold boot and says why; the next
// create makes the snapshot.
TEST_F(QemuKilledTest, WhileMakingATemplateSnapshot) {
  startWith("template.vm-booted:qemu");
  auto r = d().hutch({"run", "--name", "cold"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(readFile(d().dir() / "hutchd.log").find("QEMU (pid"), std::string::npos);
  EXPECT_NE(d().inspect("cold").value("boot", "").find("no template snapshot"), std::string::npos)
      << d().inspect("cold").dump();
  EXPECT_TRUE(entries(d().stateDir() / "snapshots").empty());
  run("warm");
  EXPECT_EQ(entries(d().stateDir() / "snapshots").size(), 1u);
  expectUsable("cold");
  expectRemovedCleanly("cold");
  expectRemovedCleanly("warm");
}

// A suspend whose QEMU dies once its state is recorded is a suspend: start resumes the memory.
// An rm whose QEMU dies leaves nothing.
TEST_F(QemuKilledTest, WhileSuspendingOrRemoving) {
  startWith("suspend.state-recorded:qemu,remove.recorded:qemu");
  run("napper");
  mark("napper", "awake");
  auto r = qemuKilledDuring({"stop", "napper"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(stateOf("napper"), "suspended");
  ASSERT_EQ(d().hutch({"start", "napper"}).exit_code, 0);
  EXPECT_EQ(cat("napper", "/dev/shm/ram-mark"), "awake\n");
  expectRemovedCleanly("napper");  // passes remove.recorded: its QEMU is killed there
  EXPECT_TRUE(processAlive(d().pid()));
}

// hutch-egress killed with SIGKILL at each step (HUTCH_FAULT_POINTS=NAME:egress) while hutchd
// goes on: the operation is not failed for it, hutchd starts a new hutch-egress, and every box
// that was served, or came up meanwhile, is served again by it.
class EgressKilledTest : public FaultTest {
 protected:
  pid_t egressPid() {
    auto text = readFile(d().stateDir() / "egress" / "egress.pid");
    return text.empty() ? 0 : std::stoi(text);
  }

  // hutch-egress's explicit proxy answers the box (policy "none": 403 for everything). curl
  // prints 000 when nothing answers.
  bool served(const std::string& box) {
    auto r = d().hutch({"exec", box, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                        "--max-time", "5", "-x", "http://10.0.2.2:3128", "http://denied.test/"});
    return r.exit_code == 0 && r.out == "403";
  }

  // `hutch ARGS` during which hutch-egress is killed; hutchd and the command go on, and a new
  // hutch-egress serves `boxes`.
  void egressKilledDuring(const std::vector<std::string>& args,
                          const std::vector<std::string>& boxes) {
    const pid_t before = egressPid();
    ASSERT_GT(before, 0);
    const size_t kills = count("hutch-egress (pid " + std::to_string(before) + ") killed");
    auto r = d().hutch(args);
    EXPECT_EQ(r.exit_code, 0) << "hutch " << args[0] << " failed for hutch-egress: " << r.err;
    EXPECT_TRUE(processAlive(d().pid())) << "hutchd died during hutch " << args[0];
    EXPECT_EQ(count("hutch-egress (pid " + std::to_string(before) + ") killed"), kills + 1)
        << "hutch-egress was not killed during hutch " << args[0];
    EXPECT_TRUE(eventually([&] { return egressPid() != before && processAlive(egressPid()); }))
        << "no new hutch-egress after hutch " << args[0];
    for (const std::string& box : boxes) {
      EXPECT_TRUE(eventually([&] { return served(box); }))
          << box << " has no network after " << args[0];
    }
  }

  size_t count(const std::string& needle) {
    const std::string log = readFile(d().dir() / "hutchd.log");
    size_t n = 0;
    for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
    return n;
  }
};

TEST_F(EgressKilledTest, AtEveryStep) {
  // Passages: vm-launched 1 is the run; agent-ready 2 the cold start; capture.disk-frozen 1 the
  // fork (whose child's boot passes vm-launched 2 and agent-ready 3); checkpoint.saved 1 the
  // checkpoint.
  startWith(
      "boot.vm-launched:egress,boot.agent-ready@2:egress,capture.disk-frozen:egress,"
      "checkpoint.saved:egress,suspend.state-recorded:egress,remove.recorded:egress");
  egressKilledDuring({"run", "--name", "a", "--network-policy", "none"}, {"a"});
  mark("a", "one");
  ASSERT_EQ(d().hutch({"stop", "--shutdown", "a"}).exit_code, 0);
  egressKilledDuring({"start", "a"}, {"a"});
  egressKilledDuring({"fork", "--name", "b", "a"}, {"a", "b"});
  egressKilledDuring({"checkpoint", "--name", "c", "a"}, {"a", "b"});
  ASSERT_EQ(d().hutch({"rollback", "a", "c"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return served("a"); })) << "no network after the rollback";
  egressKilledDuring({"stop", "a"}, {"b"});
  EXPECT_EQ(stateOf("a"), "suspended");
  ASSERT_EQ(d().hutch({"start", "a"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return served("a"); })) << "no network after the resume";
  EXPECT_EQ(cat("a", "/home/hutch/disk-mark"), "one\n");
  const std::string b_id = d().inspect("b").value("id", "");
  egressKilledDuring({"rm", "-f", "b"}, {"a"});
  expectNothingLeftOf("b", b_id);
  expectRemovedCleanly("a");
  EXPECT_EQ(readFile(d().dir() / "hutchd.log").find("[error] box="), std::string::npos);
}

}  // namespace
}  // namespace hutch::e2e

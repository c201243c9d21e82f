// kill -9 of hutchd at named steps of box operations (issue 18.3; src/base/fault.h): hutchd
// runs with HUTCH_FAULT_POINTS naming one step, is killed there by its own hand, and a new
// hutchd on the same state must find the box in a state a user can act on, with nothing lost
// that the operation had not yet promised to change: its files, its processes (a suspended
// box's memory), its checkpoints. Then rm -f leaves no QEMU, directory or snapshot behind.
#include <gtest/gtest.h>

#include <filesystem>
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
    EXPECT_TRUE(eventually([&] { return pidsMentioning(id).empty(); }))
        << "a QEMU of " << box << " outlived rm -f";
    EXPECT_TRUE(eventually([&] { return !fs::exists(d().stateDir() / "boxes" / id); }))
        << "the directory of " << box << " outlived rm -f";
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
  EXPECT_TRUE(eventually([&] { return pidsMentioning(id).empty(); }))
      << "the removed box's QEMU outlived the restart";
  EXPECT_TRUE(eventually([&] { return !fs::exists(d().stateDir() / "boxes" / id); }))
      << "the removed box's directory outlived the restart";
  run("doomed");
  expectRemovedCleanly("doomed");
}

}  // namespace
}  // namespace hutch::e2e

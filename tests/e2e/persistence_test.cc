// Boxes you can live in: stop/start keeps every file and package, a crashed hutchd or QEMU loses
// nothing, the default user is a sudoer, disks can be sized.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "harness.h"

namespace hutch::e2e {
namespace {

class PersistenceTest : public ::testing::Test {
 protected:
  void SetUp() override { daemon_ = std::make_unique<Daemon>(); }
  void TearDown() override { daemon_.reset(); }
  Daemon& d() { return *daemon_; }

  // A tiny Debian package built on the host with dpkg-deb: the box has no network.
  std::string buildDeb() {
    auto root = d().dir() / "debroot";
    std::filesystem::create_directories(root / "DEBIAN");
    std::filesystem::create_directories(root / "usr/local/bin");
    std::ofstream(root / "DEBIAN/control") << "Package: hutch-hello\nVersion: 1.0\n"
                                              "Architecture: all\nMaintainer: hutch tests "
                                              "<tests@localhost>\nDescription: test package\n";
    std::ofstream(root / "usr/local/bin/hutch-hello") << "#!/bin/sh\necho hello from a package\n";
    std::filesystem::permissions(
        root / "usr/local/bin/hutch-hello",
        std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
            std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
            std::filesystem::perms::others_exec);
    auto deb = d().dir() / "hutch-hello.deb";
    std::string cmd =
        "dpkg-deb --root-owner-group --build " + root.string() + " " + deb.string() + " >/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return readFile(deb);
  }

  std::unique_ptr<Daemon> daemon_;
};

TEST_F(PersistenceTest, StopStartKeepsFilesAndInstalledPackages) {
  ASSERT_EQ(d().hutch({"run", "--name", "home", "--disk", "3G"}).exit_code, 0);
  auto write = d().hutch({"exec", "home", "--", "sh", "-c", "echo 'my notes' > ~/notes.txt"});
  ASSERT_EQ(write.exit_code, 0) << write.err;
  auto push =
      d().hutch({"exec", "-i", "home", "--", "sh", "-c", "cat > /tmp/hello.deb"}, buildDeb(), true);
  ASSERT_EQ(push.exit_code, 0) << push.err;
  auto install = d().hutch({"exec", "home", "--", "sudo", "dpkg", "-i", "/tmp/hello.deb"});
  ASSERT_EQ(install.exit_code, 0) << install.err;
  ASSERT_EQ(d().hutch({"exec", "home", "--", "hutch-hello"}).out, "hello from a package\n");

  ASSERT_EQ(d().hutch({"stop", "--shutdown", "home"}).exit_code, 0);
  EXPECT_EQ(d().inspect("home")["state"], "stopped");
  auto start = d().hutch({"start", "home"});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  EXPECT_EQ(d().inspect("home")["state"], "running");

  EXPECT_EQ(d().hutch({"exec", "home", "--", "cat", "/home/hutch/notes.txt"}).out, "my notes\n");
  EXPECT_EQ(d().hutch({"exec", "home", "--", "hutch-hello"}).out, "hello from a package\n");
  auto pkg = d().hutch({"exec", "home", "--", "dpkg-query", "-W", "-f=${Status}", "hutch-hello"});
  EXPECT_EQ(pkg.out, "install ok installed");
  // --disk 3G: the root filesystem grew to (nearly) the disk's size.
  auto df = d().hutch({"exec", "home", "--", "df", "--output=size", "-B", "1M", "/"});
  ASSERT_EQ(df.exit_code, 0) << df.err;
  int size_mib = std::stoi(df.out.substr(df.out.find('\n') + 1));
  EXPECT_GT(size_mib, 2700) << df.out;
}

TEST_F(PersistenceTest, DefaultUserIsANonRootSudoer) {
  ASSERT_EQ(d().hutch({"run", "--name", "who"}).exit_code, 0);
  EXPECT_EQ(d().hutch({"exec", "who", "--", "id", "-un"}).out, "hutch\n");
  EXPECT_EQ(d().hutch({"exec", "who", "--", "pwd"}).out, "/home/hutch\n");
  EXPECT_EQ(d().hutch({"exec", "who", "--", "sudo", "-n", "id", "-u"}).out, "0\n");
  EXPECT_EQ(d().hutch({"exec", "-u", "root", "who", "--", "id", "-u"}).out, "0\n");
}

TEST_F(PersistenceTest, KilledDaemonRestartsAndAdoptsRunningBoxes) {
  ASSERT_EQ(d().hutch({"run", "--name", "survivor"}).exit_code, 0);
  int qemu = d().inspect("survivor")["pid"].get<int>();
  // An exec in flight when hutchd dies.
  pid_t inflight = d().start({"exec", "survivor", "--", "sleep", "30"}, d().dir() / "if.out",
                             d().dir() / "if.err");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  d().crashAndRestart();
  auto lost = collect(inflight, d().dir() / "if.out", d().dir() / "if.err");
  EXPECT_NE(lost.exit_code, 0);  // its connection died with the daemon

  auto box = d().inspect("survivor");
  EXPECT_EQ(box["state"], "running") << box.dump();
  EXPECT_EQ(box["pid"].get<int>(), qemu);
  EXPECT_TRUE(processAlive(qemu));
  auto exec = d().hutch({"exec", "survivor", "--", "echo", "still here"});
  EXPECT_EQ(exec.exit_code, 0) << exec.err;
  EXPECT_EQ(exec.out, "still here\n");
  ASSERT_EQ(d().hutch({"stop", "survivor"}).exit_code, 0);
  EXPECT_FALSE(processAlive(qemu));
}

TEST_F(PersistenceTest, KilledQemuIsReportedAndStartBringsTheDiskBack) {
  ASSERT_EQ(d().hutch({"run", "--name", "phoenix"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"exec", "phoenix", "--", "sh", "-c", "echo kept > ~/kept; sync"}).exit_code,
            0);
  ASSERT_EQ(::kill(d().inspect("phoenix")["pid"].get<int>(), SIGKILL), 0);
  auto failed = d().waitForState("phoenix", "failed");
  EXPECT_NE(failed["reason"].get<std::string>().find("signal 9"), std::string::npos);
  auto start = d().hutch({"start", "phoenix"});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  EXPECT_EQ(d().hutch({"exec", "phoenix", "--", "cat", "/home/hutch/kept"}).out, "kept\n");
}

TEST_F(PersistenceTest, AfterAHostRebootBoxesComeBackStoppedWithTheirDisks) {
  ASSERT_EQ(d().hutch({"run", "--name", "rebooted"}).exit_code, 0);
  ASSERT_EQ(
      d().hutch({"exec", "rebooted", "--", "sh", "-c", "echo survived > ~/mark; sync"}).exit_code,
      0);
  int qemu = d().inspect("rebooted")["pid"].get<int>();
  // A reboot, as hutchd sees it: every VM is gone and the kernel's boot id is new. The boot id
  // recorded in the database is made stale instead of rebooting the test machine.
  d().crashAndRestart([&] {
    ::kill(qemu, SIGKILL);
    while (processAlive(qemu)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string cmd = "sqlite3 " + (d().stateDir() / "hutch.db").string() +
                      " \"UPDATE meta SET value='an-earlier-boot' WHERE key='boot_id'\"";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  });
  auto box = d().inspect("rebooted");
  EXPECT_EQ(box["state"], "stopped") << box.dump();
  EXPECT_EQ(box["reason"], "");
  ASSERT_EQ(d().hutch({"start", "rebooted"}).exit_code, 0);
  EXPECT_EQ(d().hutch({"exec", "rebooted", "--", "cat", "/home/hutch/mark"}).out, "survived\n");
}

TEST_F(PersistenceTest, ImpossibleStartsAreRefused) {
  ASSERT_EQ(d().hutch({"run", "--name", "busy"}).exit_code, 0);
  auto again = d().hutch({"start", "busy"});
  EXPECT_EQ(again.exit_code, 65);
  EXPECT_NE(again.err.find("only a stopped, suspended or failed box"), std::string::npos)
      << again.err;
  EXPECT_EQ(d().inspect("busy")["state"], "running");
  EXPECT_EQ(d().hutch({"start", "nope"}).exit_code, 66);
  auto small = d().hutch({"run", "--name", "tiny", "--disk", "600M"});
  EXPECT_EQ(small.exit_code, 64);
  EXPECT_NE(small.err.find("at least"), std::string::npos) << small.err;
}

}  // namespace
}  // namespace hutch::e2e

// Box lifecycle end to end: run, inspect, logs, stop, rm, failures and bad input.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "harness.h"

namespace hutch::e2e {
namespace {

class BoxLifecycleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static Daemon* daemon_;
  const Daemon& d() { return *daemon_; }
};
Daemon* BoxLifecycleTest::daemon_ = nullptr;

TEST_F(BoxLifecycleTest, RunExecStopRemove) {
  auto run = d().hutch({"run", "--name", "life", "--", "echo", "hello from the box"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "hello from the box\n");

  auto box = d().inspect("life");
  ASSERT_TRUE(box.is_object());
  EXPECT_EQ(box["state"], "running");
  EXPECT_EQ(box["name"], "life");
  EXPECT_FALSE(box["accel"].get<std::string>().empty());
  pid_t qemu = box["pid"].get<int>();
  ASSERT_GT(qemu, 0);
  EXPECT_TRUE(processAlive(qemu));
  std::string id = box["id"];

  auto hostname = d().hutch({"exec", "life", "--", "hostname"});
  EXPECT_EQ(hostname.out, "life\n");

  auto logs = d().hutch({"logs", "life"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("hutch-agent"), std::string::npos) << logs.out.substr(0, 2000);

  auto dup = d().hutch({"run", "--name", "life"});
  EXPECT_EQ(dup.exit_code, 73);
  EXPECT_NE(dup.err.find("already exists"), std::string::npos) << dup.err;

  auto stop = d().hutch({"stop", "--shutdown", "life"});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_EQ(d().inspect("life")["state"], "stopped");
  EXPECT_FALSE(processAlive(qemu));

  auto exec_stopped = d().hutch({"exec", "life", "--", "true"});
  EXPECT_EQ(exec_stopped.exit_code, 65);
  EXPECT_NE(exec_stopped.err.find("stopped"), std::string::npos) << exec_stopped.err;

  auto stop_again = d().hutch({"stop", "life"});
  EXPECT_EQ(stop_again.exit_code, 65);

  auto rm = d().hutch({"rm", "life"});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  // rm answers first; the files go in the background.
  EXPECT_TRUE(eventually([&] { return !std::filesystem::exists(d().stateDir() / "boxes" / id); }));
  EXPECT_EQ(d().hutch({"inspect", "life"}).exit_code, 66);
}

TEST_F(BoxLifecycleTest, UnknownBoxGivesNotFound) {
  for (auto args : std::vector<std::vector<std::string>>{{"exec", "nope", "--", "true"},
                                                         {"inspect", "nope"},
                                                         {"stop", "nope"},
                                                         {"logs", "nope"},
                                                         {"rm", "nope"}}) {
    auto r = d().hutch(args);
    EXPECT_EQ(r.exit_code, 66) << args[0];
    EXPECT_NE(r.err.find("No such box"), std::string::npos) << args[0] << ": " << r.err;
  }
}

TEST_F(BoxLifecycleTest, ForcedRemoveLeavesNoProcessOrFile) {
  auto run = d().hutch({"run", "-d", "--name", "doomed"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto box = d().inspect("doomed");
  pid_t qemu = box["pid"].get<int>();
  std::filesystem::path dir = d().stateDir() / "boxes" / box["id"].get<std::string>();
  ASSERT_TRUE(std::filesystem::exists(dir / "disk.qcow2"));

  auto refused = d().hutch({"rm", "doomed"});
  EXPECT_EQ(refused.exit_code, 65);
  EXPECT_NE(refused.err.find("rm -f"), std::string::npos) << refused.err;
  EXPECT_TRUE(processAlive(qemu));
  EXPECT_EQ(d().inspect("doomed")["state"], "running");

  auto rm = d().hutch({"rm", "-f", "doomed"});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  // rm answers first; QEMU and the files go in the background.
  EXPECT_TRUE(eventually([&] { return !processAlive(qemu); }));
  EXPECT_TRUE(eventually([&] { return !std::filesystem::exists(dir); }));
  EXPECT_TRUE(pidsMentioning(dir.string()).empty());
  auto ls = d().hutch({"--json", "ls"});
  EXPECT_EQ(ls.out.find("doomed"), std::string::npos);
}

TEST_F(BoxLifecycleTest, QemuDeathMarksTheBoxFailed) {
  ASSERT_EQ(d().hutch({"run", "-d", "--name", "victim"}).exit_code, 0);
  pid_t qemu = d().inspect("victim")["pid"].get<int>();
  ASSERT_GT(qemu, 0);
  ASSERT_EQ(::kill(qemu, SIGKILL), 0);
  auto box = d().waitForState("victim", "failed");
  EXPECT_EQ(box["state"], "failed");
  EXPECT_NE(box["reason"].get<std::string>().find("signal 9"), std::string::npos) << box.dump();
  auto exec = d().hutch({"exec", "victim", "--", "true"});
  EXPECT_EQ(exec.exit_code, 65);
  EXPECT_EQ(d().hutch({"rm", "victim"}).exit_code, 0);
}

TEST_F(BoxLifecycleTest, BadInputIsRefusedAndCreatesNothing) {
  struct Case {
    std::vector<std::string> args;
    int code;
    const char* fragment;
  };
  for (const Case& c : std::vector<Case>{
           {{"run", "--cpus", "0"}, 64, "cpus"},
           {{"run", "--memory", "12T"}, 64, "memory"},
           {{"run", "--memory", "64"}, 64, "memory"},
           {{"run", "--name", "bad name"}, 64, "Invalid name"},
           {{"run", "--template", "nosuch"}, 66, "No template"},
           {{"exec", "--bogus-flag", "x", "--", "true"}, 64, "bogus"},
       }) {
    auto r = d().hutch(c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.args[1] << ": " << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << r.err;
  }
  auto ls = d().hutch({"--json", "ls"});
  ASSERT_EQ(ls.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(ls.out).size(), 0u) << ls.out;
}

TEST_F(BoxLifecycleTest, JsonOutputIsTheApiObject) {
  auto run = d().hutch({"--json", "run", "--name", "jsonbox"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["name"], "jsonbox");
  EXPECT_EQ(j["state"], "running");
  auto ls = nlohmann::json::parse(d().hutch({"--json", "ls"}).out);
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_EQ(ls[0]["id"], j["id"]);
  auto missing = d().hutch({"--json", "inspect", "nope"});
  auto err = nlohmann::json::parse(missing.err);
  EXPECT_EQ(err["error"]["code"], "not_found");
  EXPECT_EQ(d().hutch({"rm", "-f", "jsonbox"}).exit_code, 0);
}

}  // namespace
}  // namespace hutch::e2e

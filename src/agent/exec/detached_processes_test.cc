#include "agent/exec/detached_processes.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hutch::agent {
namespace {

namespace fs = std::filesystem;

class DetachedProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hutch-detached-XXXXXX";
    ASSERT_TRUE(::mkdtemp(dir));
    dir_ = dir;
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<proto::ProcessInfo> start(DetachedProcesses& processes, std::vector<std::string> argv) {
    proto::ExecRequest request;
    request.argv = std::move(argv);
    request.detach = true;
    HUTCH_TRY(SpawnSpec spec, makeSpawnSpec(request, UserDb::parse("", "")));
    return processes.start(spec, request);
  }

  // Waits for pid and hands its status to processes.
  void reap(DetachedProcesses& processes, pid_t pid) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(processes.onExited(pid, status));
  }

  std::string dir_;
};

TEST_F(DetachedProcessesTest, TheLogDirectoryIsCreatedAndEndedRecordsAreBounded) {
  DetachedProcesses processes(dir_ + "/var/log/hutch/exec");
  auto sleeper = start(processes, {"sleep", "1000"});
  ASSERT_TRUE(sleeper) << sleeper.error().describe();
  EXPECT_TRUE(fs::is_directory(dir_ + "/var/log/hutch/exec"));
  std::vector<std::string> ids;
  for (size_t i = 0; i < DetachedProcesses::kKeepEnded + 5; ++i) {
    auto done = start(processes, {"true"});
    ASSERT_TRUE(done) << done.error().describe();
    ids.push_back(done->id);
    reap(processes, done->pid);
  }
  auto list = processes.list().processes;
  ASSERT_EQ(list.size(), DetachedProcesses::kKeepEnded + 1);
  EXPECT_EQ(list.front().id, sleeper->id);  // running: never forgotten
  EXPECT_TRUE(list.front().running());
  EXPECT_EQ(list[1].id, ids[5]);  // the five oldest ended ones are gone
  EXPECT_EQ(list.back().id, ids.back());
  EXPECT_EQ(list.back().exit, proto::ExitStatus::exited(0));

  ASSERT_TRUE(processes.signal({sleeper->id, SIGKILL}));
  reap(processes, sleeper->pid);
  EXPECT_EQ(processes.list().processes.size(), DetachedProcesses::kKeepEnded);
  EXPECT_FALSE(processes.onExited(12345678, 0));  // not ours
}

TEST_F(DetachedProcessesTest, AnUnwritableLogDirectoryIsAnError) {
  fs::create_directories(dir_ + "/file-parent");
  { std::ofstream(dir_ + "/file-parent/x") << ""; }
  DetachedProcesses processes(dir_ + "/file-parent/x/exec");
  auto started = start(processes, {"true"});
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message().find("file-parent/x"), std::string::npos)
      << started.error().message();
  EXPECT_TRUE(processes.list().processes.empty());
}

}  // namespace
}  // namespace hutch::agent

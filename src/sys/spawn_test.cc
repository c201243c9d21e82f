#include "sys/spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <sstream>

#include "base/unique_fd.h"
#include "sys/files.h"

namespace hutch::sys {
namespace {

class SpawnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-spawn-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `script` under sh with stdout captured; returns stdout and the wait status.
  std::string run(const std::string& script, SpawnOptions options = {}) {
    auto out = openForAppend(dir_ / "out");
    EXPECT_TRUE(out);
    options.argv = {"sh", "-c", script};
    options.fds.push_back({out->get(), 1});
    auto pid = spawn(options);
    EXPECT_TRUE(pid) << pid.error().describe();
    if (!pid) return {};
    int status = 0;
    EXPECT_EQ(::waitpid(*pid, &status, 0), *pid);
    last_status_ = status;
    auto text = readFile(dir_ / "out");
    std::filesystem::remove(dir_ / "out");
    return text ? *text : std::string();
  }

  std::filesystem::path dir_;
  int last_status_ = 0;
};

TEST_F(SpawnTest, ChildGetsOnlyTheKeepList) {
  // A descriptor without O_CLOEXEC in the parent must still not leak into the child.
  int leaky = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leaky, 0);
  UniqueFd leaky_fd(leaky);
  UniqueFd kept(::open("/dev/zero", O_RDONLY | O_CLOEXEC));
  SpawnOptions options;
  options.fds.push_back({kept.get(), 7});
  std::string listing = run("ls /proc/self/fd", options);
  std::istringstream in(listing);
  std::vector<int> fds;
  for (int fd; in >> fd;) fds.push_back(fd);
  // 3 is ls's own directory handle.
  EXPECT_EQ(fds, (std::vector<int>{0, 1, 2, 3, 7})) << listing;
}

TEST_F(SpawnTest, MissingStdioIsDevNull) {
  EXPECT_EQ(run("cat; readlink /proc/self/fd/0"), "/dev/null\n");
  EXPECT_TRUE(WIFEXITED(last_status_));
}

TEST_F(SpawnTest, EnvironmentCanBeReplaced) {
  SpawnOptions options;
  options.env = std::vector<std::string>{"HUTCH_X=42"};
  EXPECT_EQ(run("echo \"$HUTCH_X ${HOME:-none}\"", options), "42 none\n");
}

TEST_F(SpawnTest, NewSessionMakesTheChildASessionLeader) {
  SpawnOptions options;
  options.argv = {"sleep", "30"};
  options.new_session = true;
  auto pid = spawn(options);
  ASSERT_TRUE(pid) << pid.error().describe();
  EXPECT_EQ(::getsid(*pid), *pid);
  ::kill(*pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFSIGNALED(status));
}

// Spawns `sleep 600` from a process of its own that then exits; returns the sleep's pid.
pid_t sleepOfAParentThatExits(bool die_with_parent) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  pid_t middle = ::fork();
  if (middle == 0) {
    ::close(fds[0]);
    auto pid = spawn({.argv = {"sleep", "600"}, .die_with_parent = die_with_parent});
    pid_t sent = pid ? *pid : -1;
    ssize_t unused = ::write(fds[1], &sent, sizeof sent);
    (void)unused;
    ::_exit(0);
  }
  ::close(fds[1]);
  pid_t child = -1;
  if (::read(fds[0], &child, sizeof child) != sizeof child) child = -1;
  ::close(fds[0]);
  ::waitpid(middle, nullptr, 0);
  return child;
}

// Alive and not a zombie.
bool running(pid_t pid) {
  auto stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

TEST_F(SpawnTest, AChildThatDiesWithItsParentIsKilledWhenTheParentEnds) {
  pid_t bound = sleepOfAParentThatExits(true);
  ASSERT_GT(bound, 0);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {  // the kernel signals at the parent's exit
    gone = !running(bound);
    if (!gone) ::usleep(100 * 1000);
  }
  EXPECT_TRUE(gone) << "pid " << bound << " outlived its parent";
  // Without it, the child runs on.
  pid_t free = sleepOfAParentThatExits(false);
  ASSERT_GT(free, 0);
  EXPECT_TRUE(running(free));
  ::kill(free, SIGKILL);
}

TEST_F(SpawnTest, SignalDispositionsAreReset) {
  // An ignored SIGPIPE would otherwise be inherited across exec.
  auto old = std::signal(SIGPIPE, SIG_IGN);
  std::string text = run("grep SigIgn /proc/self/status");
  std::signal(SIGPIPE, old);
  EXPECT_EQ(text, "SigIgn:\t0000000000000000\n");
}

TEST_F(SpawnTest, MissingProgramIsAnError) {
  SpawnOptions options;
  options.argv = {"hutch-no-such-program"};
  auto pid = spawn(options);
  ASSERT_FALSE(pid);
  EXPECT_EQ(pid.error().code(), Errc::kNotFound);
  EXPECT_NE(pid.error().message().find("hutch-no-such-program"), std::string::npos);
}

TEST_F(SpawnTest, ExecFailureIsReportedAndReaped) {
  // A file that passes access(X_OK) but cannot be exec'd: a directory.
  SpawnOptions options;
  options.argv = {dir_.string()};
  auto pid = spawn(options);
  ASSERT_FALSE(pid);
  EXPECT_EQ(pid.error().sysErrno(), EACCES);
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);  // no child left behind
}

TEST_F(SpawnTest, NewPidNamespaceChildIsPidOneAndStillOurChild) {
  if (::geteuid() != 0) GTEST_SKIP() << "Needs root to create a PID namespace";
  SpawnOptions options;
  options.clone_flags = CLONE_NEWPID;
  // $$ is the pid inside the namespace; the exit status reaches us under the returned pid.
  EXPECT_EQ(run("echo $$; exit 7", options), "1\n");
  ASSERT_TRUE(WIFEXITED(last_status_));
  EXPECT_EQ(WEXITSTATUS(last_status_), 7);
}

TEST_F(SpawnTest, CloneFlagsAcceptOnlyNamespaces) {
  SpawnOptions options;
  options.argv = {"true"};
  options.clone_flags = CLONE_VM;
  auto pid = spawn(options);
  ASSERT_FALSE(pid);
  EXPECT_EQ(pid.error().code(), Errc::kInvalidArgument);
}

TEST(FindExecutableTest, SearchesPath) {
  auto sh = findExecutable("sh");
  ASSERT_TRUE(sh);
  EXPECT_TRUE(sh->is_absolute());
  EXPECT_FALSE(findExecutable(""));
}

}  // namespace
}  // namespace hutch::sys

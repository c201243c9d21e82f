// The helper's sandbox, applied in a child process: once confined, nothing can be opened, run or
// connected to, while reading and writing descriptors it holds still works.
#include "diff/sandbox.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace hutch::diff {
namespace {

// Runs `body` in a child; its return value is the child's exit status.
int inChild(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(SandboxTest, ConfinedProcessCannotOpenRunOrConnect) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  int status = inChild([&] {
    if (::geteuid() == 0 && !dropPrivileges(65534, 65534)) return 1;
    if (::geteuid() == 0) return 2;
    if (::geteuid() != 0 && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 3;
    if (!confine()) return 4;
    if (::open("/etc/hostname", O_RDONLY) >= 0 || errno != EPERM) return 5;
    if (::socket(AF_UNIX, SOCK_STREAM, 0) >= 0 || errno != EPERM) return 6;
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ::execv("/bin/true", argv);
    if (errno != EPERM) return 7;
    if (::write(pipefd[1], "ok", 2) != 2) return 8;  // what it holds still works
    return 0;
  });
  EXPECT_EQ(status, 0);
  char buf[2] = {};
  EXPECT_EQ(::read(pipefd[0], buf, 2), 2);
  EXPECT_EQ(std::string(buf, 2), "ok");
  ::close(pipefd[0]);
  ::close(pipefd[1]);
}

TEST(SandboxTest, RootIsNeverTheTarget) {
  EXPECT_FALSE(dropPrivileges(0, 65534));
  EXPECT_FALSE(dropPrivileges(65534, 0));
}

}  // namespace
}  // namespace hutch::diff

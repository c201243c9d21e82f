#include "sys/pidfd.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <csignal>

#include "sys/spawn.h"

namespace hutch::sys {
namespace {

pid_t start(std::vector<std::string> argv) {
  SpawnOptions options;
  options.argv = std::move(argv);
  auto pid = spawn(options);
  EXPECT_TRUE(pid) << pid.error().describe();
  return pid ? *pid : -1;
}

void waitReadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
}

TEST(PidfdTest, ReportsASignalledChild) {
  pid_t pid = start({"sleep", "30"});
  auto fd = pidfdOpen(pid);
  ASSERT_TRUE(fd) << fd.error().describe();
  EXPECT_FALSE(pidfdExited(fd->get()));
  auto running = pidfdTryReap(fd->get());
  ASSERT_TRUE(running);
  EXPECT_FALSE(running->has_value());

  ASSERT_TRUE(pidfdSignal(fd->get(), SIGKILL));
  waitReadable(fd->get());
  EXPECT_TRUE(pidfdExited(fd->get()));
  auto status = pidfdTryReap(fd->get());
  ASSERT_TRUE(status);
  ASSERT_TRUE(status->has_value());
  EXPECT_EQ(**status, ExitStatus::signaled(SIGKILL));
  EXPECT_EQ((*status)->describe(), "killed by signal 9 (SIGKILL)");
  // Signalling a reaped process is not an error.
  EXPECT_TRUE(pidfdSignal(fd->get(), SIGKILL));
}

TEST(PidfdTest, ReportsAnExitStatus) {
  pid_t pid = start({"sh", "-c", "exit 3"});
  auto fd = pidfdOpen(pid);
  ASSERT_TRUE(fd);
  waitReadable(fd->get());
  auto status = pidfdTryReap(fd->get());
  ASSERT_TRUE(status && status->has_value());
  EXPECT_EQ((*status)->describe(), "exited with status 3");
}

TEST(PidfdTest, NotOurChild) {
  auto fd = pidfdOpen(1);
  ASSERT_TRUE(fd);
  auto status = pidfdTryReap(fd->get());
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code(), Errc::kFailedPrecondition);
}

TEST(PidfdTest, MissingProcess) {
  auto fd = pidfdOpen(0x3ffffff0);
  ASSERT_FALSE(fd);
  EXPECT_EQ(fd.error().code(), Errc::kNotFound);
}

TEST(ExitStatusTest, Describe) {
  EXPECT_EQ(ExitStatus::exited(0).describe(), "exited with status 0");
  EXPECT_EQ(ExitStatus::signaled(15).describe(), "killed by signal 15 (SIGTERM)");
  EXPECT_EQ(ExitStatus::fromWaitStatus(0x0100), ExitStatus::exited(1));
  EXPECT_EQ(ExitStatus::fromWaitStatus(9), ExitStatus::signaled(9));
}

}  // namespace
}  // namespace hutch::sys

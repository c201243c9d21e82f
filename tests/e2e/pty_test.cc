// Terminals end to end: `hutch exec -it` and `hutch shell` run on a pty pair made by the test, as
// if typed at a terminal; -t refused without a terminal; -i from scripts; SIGINT forwarding.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <termios.h>

#include <chrono>
#include <thread>

#include "harness.h"

namespace hutch::e2e {
namespace {

constexpr auto kHangGuard = std::chrono::seconds(120);  // only against hangs

class PtyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon();
    auto run = daemon_->hutch({"run", "--name", "tty"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  // Waits until a process named name runs in the box (so that ^C has someone to interrupt).
  static bool waitForProcessInBox(const std::string& name) {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (std::chrono::steady_clock::now() < deadline) {
      if (daemon_->hutch({"exec", "tty", "--", "pgrep", "-x", name}).exit_code == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  static Daemon* daemon_;
};
Daemon* PtyTest::daemon_ = nullptr;

TEST_F(PtyTest, ExecItGivesARealTerminal) {
  PtyCli cli(*daemon_, {"exec", "-it", "-e", "PS1=pty$ ", "tty", "--", "sh"}, 24, 80);
  ASSERT_TRUE(cli.waitFor("pty$ ")) << cli.output();

  ASSERT_TRUE(cli.write("echo $((6*7))\r"));  // Enter in raw mode is \r; the box maps it to \n
  ASSERT_TRUE(cli.waitFor("42\r\n")) << cli.output();
  // Our terminal is raw meanwhile: the box's terminal does the echo and the line editing.
  const struct termios during = cli.modes();
  EXPECT_EQ(during.c_lflag & (ICANON | ECHO | ISIG), 0u);

  ASSERT_TRUE(cli.write("test -t 0 && echo is-a-$((1+1))-tty\r"));
  ASSERT_TRUE(cli.waitFor("is-a-2-tty\r\n")) << cli.output();

  // The initial size, then a resize of our terminal: the CLI gets SIGWINCH and forwards it.
  ASSERT_TRUE(cli.write("stty size\r"));
  ASSERT_TRUE(cli.waitFor("24 80\r\n")) << cli.output();
  cli.resize(33, 101);
  ASSERT_TRUE(cli.write("stty size\r"));
  ASSERT_TRUE(cli.waitFor("33 101\r\n")) << cli.output();

  // ^C is the byte 0x03 here; the box's terminal turns it into SIGINT for the foreground job.
  ASSERT_TRUE(cli.write("sleep 100\r"));
  ASSERT_TRUE(waitForProcessInBox("sleep"));
  ASSERT_TRUE(cli.write("\x03"));
  ASSERT_TRUE(cli.write("echo back-$?\r"));
  ASSERT_TRUE(cli.waitFor("back-130")) << cli.output();

  ASSERT_TRUE(cli.write("exit 7\r"));
  EXPECT_EQ(cli.wait(), 7) << cli.output();
  EXPECT_TRUE(sameModes(cli.modes(), cli.initialModes())) << "the terminal was not restored";
}

TEST_F(PtyTest, ShellIsALoginShellForTheUser) {
  PtyCli cli(*daemon_, {"shell", "-u", "hutch", "-w", "/tmp", "tty"}, 30, 100);
  ASSERT_TRUE(cli.waitFor("$ ")) << cli.output();
  ASSERT_TRUE(cli.write("shopt -q login_shell && echo login-$((1+1)) $(id -un) $PWD $TERM\r"));
  ASSERT_TRUE(cli.waitFor("login-2 hutch /tmp xterm-256color")) << cli.output();
  ASSERT_TRUE(cli.write("stty size\r"));
  ASSERT_TRUE(cli.waitFor("30 100\r\n")) << cli.output();
  ASSERT_TRUE(cli.write("exit 3\r"));
  EXPECT_EQ(cli.wait(), 3) << cli.output();
  EXPECT_TRUE(sameModes(cli.modes(), cli.initialModes()));
}

TEST_F(PtyTest, TtyWithoutInteractiveKeepsOurTerminalAsItIs) {
  PtyCli cli(*daemon_, {"exec", "-t", "tty", "--", "sh", "-c", "test -t 1 && echo out-is-a-tty"},
             24, 80);
  EXPECT_EQ(cli.wait(), 0) << cli.output();
  // The box's terminal wrote "\r\n"; ours, still cooked, turned the "\n" into "\r\n" again.
  EXPECT_NE(cli.output().find("out-is-a-tty\r\r\n"), std::string::npos) << cli.output();
  EXPECT_TRUE(sameModes(cli.modes(), cli.initialModes()));
}

TEST_F(PtyTest, TheTerminalIsRestoredWhenHutchIsKilled) {
  for (int signo : {SIGTERM, SIGHUP}) {
    PtyCli cli(*daemon_, {"exec", "-it", "-e", "PS1=pty$ ", "tty", "--", "sh"}, 24, 80);
    ASSERT_TRUE(cli.waitFor("pty$ ")) << cli.output();
    const struct termios during = cli.modes();
    ASSERT_EQ(during.c_lflag & ICANON, 0u);
    ASSERT_EQ(::kill(cli.pid(), signo), 0);
    EXPECT_EQ(cli.wait(), 128 + signo) << cli.output();
    EXPECT_TRUE(sameModes(cli.modes(), cli.initialModes())) << "signal " << signo;
  }
}

TEST_F(PtyTest, TtyNeedsATerminalOnStdin) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"exec", "-t", "tty", "--", "true"},
        std::vector<std::string>{"exec", "-it", "tty", "--", "true"},
        std::vector<std::string>{"shell", "tty"}}) {
    auto r = daemon_->hutch(args, "input\n", /*feed_stdin=*/true);
    EXPECT_EQ(r.exit_code, 64) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("not a TTY"), std::string::npos) << r.err;
  }
  // hutch run -t refuses before creating a box.
  const size_t boxes = nlohmann::json::parse(daemon_->hutch({"--json", "ls"}).out).size();
  auto run = daemon_->hutch({"run", "-t", "--", "true"});
  EXPECT_EQ(run.exit_code, 64) << run.err;
  EXPECT_NE(run.err.find("not a TTY"), std::string::npos) << run.err;
  EXPECT_EQ(nlohmann::json::parse(daemon_->hutch({"--json", "ls"}).out).size(), boxes);
}

TEST_F(PtyTest, InteractiveWithoutTtyStillWorksFromScripts) {
  auto r = daemon_->hutch(
      {"exec", "-i", "tty", "--", "sh", "-c", "test -t 0 || echo no-tty; cat; echo done"},
      "from a script\n", /*feed_stdin=*/true);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "no-tty\nfrom a script\ndone\n");
}

TEST_F(PtyTest, SigintIsForwardedWithoutATerminal) {
  const auto out = daemon_->dir() / "sigint.out";
  const auto err = daemon_->dir() / "sigint.err";
  const pid_t pid = daemon_->start({"exec", "tty", "--", "sh", "-c",
                                    "trap 'echo got-int; exit 9' INT; echo ready; "
                                    "while :; do sleep 0.1; done"},
                                   out, err);
  ASSERT_GT(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (readFile(out).find("ready") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  while (processAlive(pid) && std::chrono::steady_clock::now() < deadline + kHangGuard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (processAlive(pid)) {
    ADD_FAILURE() << "hutch did not exit after SIGINT";
    ::kill(pid, SIGKILL);
  }
  auto r = collect(pid, out, err);
  // hutch did not die of the SIGINT: it passed it on and returns the command's own status.
  EXPECT_EQ(r.exit_code, 9) << r.err;
  EXPECT_EQ(r.out, "ready\ngot-int\n");
}

}  // namespace
}  // namespace hutch::e2e

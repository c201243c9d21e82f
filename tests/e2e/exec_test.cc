// exec end to end against one real box: exit codes, streams, stdin, binary data, concurrency,
// large output.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include "harness.h"

namespace hutch::e2e {
namespace {

class ExecTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon();
    auto run = daemon_->hutch({"run", "--name", "shell"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static Daemon* daemon_;

  CommandResult exec(std::vector<std::string> argv, const std::string& input = {},
                     bool interactive = false) {
    std::vector<std::string> args{"exec"};
    if (interactive) args.push_back("-i");
    args.push_back("shell");
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    return daemon_->hutch(args, input, interactive);
  }
};
Daemon* ExecTest::daemon_ = nullptr;

TEST_F(ExecTest, ExitCodesAndSignals) {
  EXPECT_EQ(exec({"true"}).exit_code, 0);
  EXPECT_EQ(exec({"false"}).exit_code, 1);
  EXPECT_EQ(exec({"sh", "-c", "exit 3"}).exit_code, 3);
  EXPECT_EQ(exec({"sh", "-c", "kill -9 $$"}).exit_code, 137);
  EXPECT_EQ(exec({"sh", "-c", "kill -TERM $$"}).exit_code, 143);
}

TEST_F(ExecTest, StdoutAndStderrLandOnTheirOwnStreams) {
  auto r = exec({"sh", "-c", "echo out; echo err >&2; echo out2"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "out\nout2\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST_F(ExecTest, StdinIsForwardedWithEof) {
  auto r = exec({"cat"}, "line one\nline two\n", true);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "line one\nline two\n");
  auto count = exec({"wc", "-c"}, std::string(100000, 'x'), true);
  EXPECT_EQ(count.out, "100000\n");
  // Without -i the command sees an empty stdin and does not hang.
  EXPECT_EQ(exec({"cat"}).out, "");
}

TEST_F(ExecTest, BinaryDataRoundTripsUnchanged) {
  std::string bytes;
  for (int rep = 0; rep < 64; ++rep) {
    for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  }
  auto r = exec({"cat"}, bytes, true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.size(), bytes.size());
  EXPECT_TRUE(r.out == bytes);
}

TEST_F(ExecTest, EnvironmentWorkdirAndUser) {
  auto r = daemon_->hutch({"exec", "-e", "GREETING=hi there", "-w", "/tmp", "shell", "--", "sh",
                           "-c", "echo \"$GREETING\"; pwd"});
  EXPECT_EQ(r.out, "hi there\n/tmp\n") << r.err;
  auto user = daemon_->hutch({"exec", "-u", "hutch", "shell", "--", "id", "-un"});
  EXPECT_EQ(user.out, "hutch\n") << user.err;
  auto root = daemon_->hutch({"exec", "-u", "root", "shell", "--", "id", "-u"});
  EXPECT_EQ(root.out, "0\n");
  EXPECT_EQ(exec({"id", "-u"}).out, "1000\n");  // the default user is not root
}

TEST_F(ExecTest, MissingCommandGives127) {
  auto r = exec({"no-such-command-here"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("no-such-command-here"), std::string::npos) << r.err;
}

TEST_F(ExecTest, TenConcurrentExecsShareTheChannel) {
  std::vector<pid_t> pids;
  for (int i = 0; i < 10; ++i) {
    pids.push_back(daemon_->start({"exec", "shell", "--", "sh", "-c",
                                   fmt::format("sleep 1; echo done-{}; echo e{} >&2", i, i)},
                                  daemon_->dir() / fmt::format("c{}.out", i),
                                  daemon_->dir() / fmt::format("c{}.err", i)));
  }
  for (int i = 0; i < 10; ++i) {
    auto r = collect(pids[i], daemon_->dir() / fmt::format("c{}.out", i),
                     daemon_->dir() / fmt::format("c{}.err", i));
    EXPECT_EQ(r.exit_code, 0) << i << ": " << r.err;
    EXPECT_EQ(r.out, fmt::format("done-{}\n", i));
    EXPECT_EQ(r.err, fmt::format("e{}\n", i));
  }
}

TEST_F(ExecTest, FiftyMegabytesArriveComplete) {
  constexpr size_t kSize = 50u * 1024 * 1024;
  auto make = exec(
      {"sh", "-c", fmt::format("head -c {} /dev/urandom > /tmp/big && sha256sum /tmp/big", kSize)});
  ASSERT_EQ(make.exit_code, 0) << make.err;
  std::string guest_sum = make.out.substr(0, 64);
  auto cat = exec({"cat", "/tmp/big"});
  ASSERT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_EQ(cat.out.size(), kSize);
  EXPECT_EQ(sha256Hex(cat.out), guest_sum);
}

}  // namespace
}  // namespace hutch::e2e

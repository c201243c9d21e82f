#include "sys/run.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "sys/files.h"

namespace hutch::sys {
namespace {

class RunLoggedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-run-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

TEST_F(RunLoggedTest, TheOutputGoesToTheLogAndToTheCallerAsItComes) {
  std::string seen;
  auto out = runLogged({"sh", "-c", "echo one; sleep 0.3; echo two >&2; echo /the/last/line"},
                       dir_ / "build.log", [&seen](std::string_view piece) { seen += piece; });
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_EQ(*out, "one\ntwo\n/the/last/line\n");
  EXPECT_EQ(seen, *out);
  EXPECT_EQ(readFile(dir_ / "build.log").value_or(""), *out);
}

TEST_F(RunLoggedTest, AFailureSaysHowItEndedAndWhatItWrote) {
  auto out = runLogged({"sh", "-c", "echo 'no recipe here'; exit 3"}, dir_ / "build.log");
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code(), Errc::kInternal);
  EXPECT_NE(out.error().describe().find("exited with status 3"), std::string::npos)
      << out.error().describe();
  EXPECT_NE(out.error().describe().find("no recipe here"), std::string::npos);
  EXPECT_FALSE(runLogged({"/no/such/tool"}, dir_ / "other.log"));
}

TEST_F(RunLoggedTest, TheToolRunsInASessionOfItsOwn) {
  // Signals for this process's group or session (a terminal's ^C, a hangup) do not reach it.
  auto out = runLogged({"sh", "-c", "cut -d' ' -f6 /proc/$$/stat"}, dir_ / "build.log");
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_NE(std::stol(*out), static_cast<long>(::getsid(0)));
}

TEST_F(RunLoggedTest, TheLastMebibyteIsKeptSoTheLastLineIsNeverLost) {
  auto out = runLogged({"sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo /last"},
                       dir_ / "build.log");
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_LE(out->size(), size_t{1} << 20);
  EXPECT_TRUE(out->ends_with("x\n/last\n")) << out->substr(out->size() - 20);
  EXPECT_EQ(std::filesystem::file_size(dir_ / "build.log"), 3000000u + 7u);
}

TEST(RunStdoutTest, StdoutAloneIsTheAnswerAndStderrIsForErrors) {
  auto out = runStdout({"sh", "-c", "echo '{\"a\":1}'; echo 'a warning' >&2"}, 1024);
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_EQ(*out, "{\"a\":1}\n");
  auto failed = runStdout({"sh", "-c", "echo partial; echo 'manifest unknown' >&2; exit 1"}, 1024);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), Errc::kInternal);
  EXPECT_NE(failed.error().describe().find("manifest unknown"), std::string::npos);
  EXPECT_EQ(failed.error().describe().find("partial"), std::string::npos);
}

TEST(RunStdoutTest, MoreThanTheLimitStopsTheTool) {
  auto out = runStdout({"sh", "-c", "yes hostile"}, 4096);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code(), Errc::kResourceExhausted);
}

// The bounds below only prove that the tool was stopped (it would run for ten minutes).
constexpr auto kStopped = std::chrono::seconds(60);

TEST(RunLimitsTest, AToolPastItsTimeoutIsKilledAndSaysSo) {
  const auto start = std::chrono::steady_clock::now();
  std::string seen;
  auto out = runCapture({"sh", "-c", "echo started; exec sleep 600"},
                        [&seen](std::string_view piece) { seen += piece; },
                        {.timeout = std::chrono::milliseconds(300)});
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code(), Errc::kTimeout);
  EXPECT_NE(out.error().message().find("did not finish within 300 ms"), std::string::npos)
      << out.error().message();
  EXPECT_EQ(seen, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, kStopped);

  auto quiet =
      runStdout({"sh", "-c", "exec sleep 600"}, 1024, {.timeout = std::chrono::seconds(1)});
  ASSERT_FALSE(quiet);
  EXPECT_EQ(quiet.error().code(), Errc::kTimeout);
  EXPECT_NE(quiet.error().message().find("within 1 s"), std::string::npos);
}

TEST(RunLimitsTest, ACancelledToolIsKilled) {
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  std::thread canceller([cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel->store(true);
  });
  const auto start = std::chrono::steady_clock::now();
  auto out = runCapture({"sh", "-c", "exec sleep 600"}, {}, {.cancel = cancel});
  canceller.join();
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code(), Errc::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kStopped);
  // Set before the start: the tool does not get to run on.
  auto again = runStdout({"sh", "-c", "exec sleep 600"}, 1024, {.cancel = cancel});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), Errc::kCancelled);
}

TEST(RunLimitsTest, AToolThatEndsInTimeIsNotStopped) {
  auto out = runCapture(
      {"sh", "-c", "echo fine"}, {},
      {.timeout = std::chrono::seconds(60), .cancel = std::make_shared<std::atomic<bool>>(false)});
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_EQ(*out, "fine\n");
}

}  // namespace
}  // namespace hutch::sys

#include "sys/run.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

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

}  // namespace
}  // namespace hutch::sys

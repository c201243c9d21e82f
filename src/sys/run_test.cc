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

}  // namespace
}  // namespace hutch::sys

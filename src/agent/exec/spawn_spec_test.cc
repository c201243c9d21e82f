#include "agent/exec/spawn_spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace hutch::agent {
namespace {

class SpawnSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-spec-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/bin");
    std::filesystem::create_directories(dir_ + "/home/alice");
    std::ofstream(dir_ + "/bin/tool") << "#!/bin/sh\n";
    ::chmod((dir_ + "/bin/tool").c_str(), 0755);
    std::ofstream(dir_ + "/bin/data") << "x";
    ::chmod((dir_ + "/bin/data").c_str(), 0644);
    users_ = UserDb::parse(
        "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::" + dir_ + "/home/alice:/bin/sh\n", "");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  UserDb users_ = UserDb::parse("", "");
};

TEST_F(SpawnSpecTest, SearchesTheRequestsPath) {
  proto::ExecRequest request{{"tool", "arg"}, {"PATH=relative:" + dir_ + "/bin"}};
  auto spec = makeSpawnSpec(request, users_);
  ASSERT_TRUE(spec) << spec.error().message();
  EXPECT_EQ(spec->path, dir_ + "/bin/tool");
  EXPECT_EQ(spec->argv, (std::vector<std::string>{"tool", "arg"}));
}

TEST_F(SpawnSpecTest, NonExecutableAndMissingCommandsAreNotFound) {
  for (const char* name : {"data", "absent"}) {
    auto spec = makeSpawnSpec({{name}, {"PATH=" + dir_ + "/bin"}}, users_);
    ASSERT_FALSE(spec) << name;
    EXPECT_EQ(spec.error().code(), Errc::kNotFound);
    EXPECT_NE(spec.error().message().find(name), std::string::npos);
  }
}

TEST_F(SpawnSpecTest, SlashCommandsAreNotSearched) {
  auto spec = makeSpawnSpec({{"./x"}}, users_);
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->path, "./x");
}

TEST_F(SpawnSpecTest, EnvGetsDefaultsOnlyWhenAbsent) {
  auto spec = makeSpawnSpec({{"/bin/true"}, {"A=1", "HOME=/custom"}, "", "alice"}, users_);
  ASSERT_TRUE(spec) << spec.error().message();
  EXPECT_EQ(spec->env,
            (std::vector<std::string>{"A=1", "HOME=/custom", std::string("PATH=") + kDefaultPath,
                                      "USER=alice"}));
  EXPECT_EQ(spec->uid, 1000u);
  EXPECT_EQ(spec->cwd, dir_ + "/home/alice");  // the home, even with HOME overridden
}

TEST_F(SpawnSpecTest, CwdFallsBackToRootWhenTheHomeIsMissing) {
  auto users = UserDb::parse("bob:x:1001:1001::/nonexistent:/bin/sh\n", "");
  auto spec = makeSpawnSpec({{"/bin/true"}, {}, "", "bob"}, users);
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->cwd, "/");
}

TEST_F(SpawnSpecTest, MissingCwdAndUnknownUserAreNotFound) {
  auto cwd = makeSpawnSpec({{"/bin/true"}, {}, "/does/not/exist"}, users_);
  ASSERT_FALSE(cwd);
  EXPECT_EQ(cwd.error().code(), Errc::kNotFound);
  auto user = makeSpawnSpec({{"/bin/true"}, {}, "", "nobody-here"}, users_);
  ASSERT_FALSE(user);
  EXPECT_EQ(user.error().code(), Errc::kNotFound);
}

TEST_F(SpawnSpecTest, TtyGetsATermUnlessTheRequestSetsOne) {
  proto::ExecRequest request{{"/bin/true"}, {"A=1"}};
  request.tty = true;
  request.rows = 24;
  request.cols = 80;
  auto spec = makeSpawnSpec(request, users_);
  ASSERT_TRUE(spec) << spec.error().message();
  EXPECT_TRUE(spec->tty);
  EXPECT_EQ(spec->rows, 24);
  EXPECT_EQ(spec->cols, 80);
  ASSERT_NE(findEnv(spec->env, "TERM"), nullptr);
  EXPECT_EQ(*findEnv(spec->env, "TERM"), "TERM=xterm-256color");

  request.env = {"TERM=vt100"};
  spec = makeSpawnSpec(request, users_);
  ASSERT_TRUE(spec);
  EXPECT_EQ(*findEnv(spec->env, "TERM"), "TERM=vt100");
  EXPECT_EQ(std::count_if(spec->env.begin(), spec->env.end(),
                          [](const std::string& e) { return e.rfind("TERM=", 0) == 0; }),
            1);

  // No terminal, no TERM.
  request.tty = false;
  request.env = {};
  spec = makeSpawnSpec(request, users_);
  ASSERT_TRUE(spec);
  EXPECT_EQ(findEnv(spec->env, "TERM"), nullptr);
}

TEST_F(SpawnSpecTest, LoginShellIsBashWhenPresentElseSh) {
  EXPECT_EQ(loginShell(dir_ + "/bin/tool"), (std::vector<std::string>{dir_ + "/bin/tool", "-l"}));
  EXPECT_EQ(loginShell(dir_ + "/bin/data"), (std::vector<std::string>{"/bin/sh", "-l"}));
  EXPECT_EQ(loginShell(dir_ + "/bin/absent"), (std::vector<std::string>{"/bin/sh", "-l"}));

  proto::ExecRequest request;
  request.login_shell = true;
  auto spec = makeSpawnSpec(request, users_);
  ASSERT_TRUE(spec) << spec.error().message();
  EXPECT_EQ(spec->argv, loginShell());
  EXPECT_EQ(spec->path, spec->argv[0]);
}

TEST(FindEnvTest, MatchesWholeKeys) {
  std::vector<std::string> env{"PATHX=1", "PATH=/bin", "PATH=/other"};
  ASSERT_NE(findEnv(env, "PATH"), nullptr);
  EXPECT_EQ(*findEnv(env, "PATH"), "PATH=/bin");
  EXPECT_EQ(findEnv(env, "PAT"), nullptr);
}

}  // namespace
}  // namespace hutch::agent

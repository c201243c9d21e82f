// Dockerfile builds end to end (issue 32): `hutch template build NAME -f Dockerfile CONTEXT`
// sends the context (minus .dockerignore) to hutchd, every step runs in a real box, the result
// is a template whose boxes have the files, the ENV, USER and WORKDIR, and, with a start
// command, the process already running. Rebuilds resume from the last unchanged step.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "harness.h"

namespace hutch::e2e {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class BuildTest : public ::testing::Test {
 protected:
  // A ready check that never passes gives up after 20 s.
  static void SetUpTestSuite() { daemon_ = new Daemon({"--ready-timeout", "20"}); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-build-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    context_ = tmpl;
  }
  void TearDown() override { fs::remove_all(context_); }

  void write(const std::string& relative, const std::string& content) {
    fs::path path = context_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
  }
  CommandResult build(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        "template",        "build",    name,   "-f",     (context_ / "Dockerfile").string(),
        context_.string(), "--memory", "512m", "--cpus", "1",
        "--disk",          "2g"};
    args.insert(args.end(), extra.begin(), extra.end());
    return daemon_->hutch(args);
  }
  static json templateNamed(const std::string& name) {
    auto listed = json::parse(daemon_->hutch({"--json", "template", "ls"}).out, nullptr, false);
    for (const auto& t : listed) {
      if (t.value("name", "") == name) return t;
    }
    return json();
  }
  // The boxes of builds still there (the builder removes its own whatever happens).
  static std::vector<std::string> buildBoxes() {
    std::vector<std::string> out;
    auto listed = json::parse(daemon_->hutch({"--json", "ls"}).out, nullptr, false);
    if (!listed.is_array()) return {"(ls failed)"};
    for (const auto& b : listed) {
      if (b.value("name", "").starts_with("build-")) out.push_back(b.value("name", ""));
    }
    return out;
  }

  fs::path context_;
  static Daemon* daemon_;
};
Daemon* BuildTest::daemon_ = nullptr;

TEST_F(BuildTest, EveryStepRunsInABoxAndTheTemplateKeepsTheImageConfig) {
  write("Dockerfile", R"DF(FROM base
ARG GREETING=hello
ENV APP_HOME=/srv/app PATH=/srv/app/bin:$PATH
WORKDIR $APP_HOME
COPY app/ ./
RUN echo "$GREETING from $(id -un) in $(pwd)" > built.txt && test ! -e /srv/app/debug.log
COPY --chown=1000:1000 --chmod=755 run.sh bin/
LABEL org.example.team="agents"
USER user
EXPOSE 8000
CMD ["sh", "-c", "exec run.sh"]
)DF");
  write("app/main.py", "print('hi')\n");
  write("app/lib/x.txt", "x\n");
  write("app/debug.log", "left out by .dockerignore\n");
  write("run.sh", "#!/bin/sh\necho run\n");
  write(".dockerignore", "**/*.log\n");
  auto built = build("app", {"--build-arg", "GREETING=hi"});
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
  EXPECT_NE(built.err.find("Step 4/9: RUN"), std::string::npos) << built.err;
  json t = templateNamed("app");
  EXPECT_EQ(t["source"], "build") << t.dump();
  EXPECT_EQ(t["defaults"]["user"], "user") << t.dump();
  EXPECT_EQ(t["defaults"]["workdir"], "/srv/app") << t.dump();
  EXPECT_EQ(t["defaults"]["cmd"], json::array({"sh", "-c", "exec run.sh"})) << t.dump();
  EXPECT_EQ(t["defaults"]["exposed_ports"], json::array({"8000/tcp"})) << t.dump();
  EXPECT_EQ(t["defaults"]["labels"]["org.example.team"], "agents") << t.dump();
  EXPECT_TRUE(buildBoxes().empty());

  ASSERT_EQ(daemon_->hutch({"run", "--name", "app1", "--template", "app"}).exit_code, 0);
  // An exec gets the template's USER, WORKDIR and ENV, as `docker run` of the image would.
  auto who = daemon_->hutch(
      {"exec", "app1", "--", "sh", "-c",
       "id -un; pwd; echo $PATH; cat built.txt lib/x.txt; stat -c '%u:%g %a' bin/run.sh; "
       "run.sh; ls debug.log 2>&1 || true"});
  ASSERT_EQ(who.exit_code, 0) << who.err;
  EXPECT_EQ(who.out,
            "user\n/srv/app\n/srv/app/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
            "/sbin:/bin\nhi from root in /srv/app\nx\n1000:1000 755\nrun\n"
            "ls: cannot access 'debug.log': No such file or directory\n")
      << who.out;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "app1"}).exit_code, 0);
}

TEST_F(BuildTest, ARebuildRunsOnlyFromTheFirstChangedStep) {
  write("Dockerfile", R"DF(FROM base
COPY deps.txt /opt/deps.txt
RUN cp /opt/deps.txt /opt/installed.txt
COPY src/ /opt/src/
RUN cat /opt/src/version > /opt/built-version
)DF");
  write("deps.txt", "one\n");
  write("src/version", "1\n");
  auto first = build("cached");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.err.find("CACHED"), std::string::npos) << first.err;
  ASSERT_EQ(daemon_->hutch({"template", "rm", "cached"}).exit_code, 0);

  // Only the second COPY's source changed: the steps before it come from the cache.
  write("src/version", "2\n");
  auto second = build("cached");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("Step 1/4: CACHED COPY deps.txt"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("Step 2/4: CACHED RUN cp"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("Step 3/4: COPY src/"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("Step 4/4: RUN cat"), std::string::npos) << second.err;
  EXPECT_EQ(templateNamed("cached")["build"]["cached_steps"], 2) << second.err;
  ASSERT_EQ(daemon_->hutch({"run", "--name", "cached1", "--template", "cached"}).exit_code, 0);
  auto version =
      daemon_->hutch({"exec", "cached1", "--", "cat", "/opt/built-version", "/opt/installed.txt"});
  EXPECT_EQ(version.out, "2\none\n") << version.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "cached1"}).exit_code, 0);
  EXPECT_TRUE(buildBoxes().empty());
}

TEST_F(BuildTest, AMultiStageBuildCopiesFromAnEarlierStage) {
  write("Dockerfile", R"DF(FROM base AS builder
WORKDIR /src
COPY hello.sh .
RUN mkdir -p out/lib && cp hello.sh out/hello && chmod 755 out/hello && \
    echo data > out/lib/data.txt && ln -s hello out/hi
FROM base
COPY --from=builder /src/out/ /opt/app/
RUN /opt/app/hi > /opt/said
)DF");
  write("hello.sh", "#!/bin/sh\necho hello from the builder stage\n");
  auto built = build("multi");
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_NE(built.err.find("stage 1: Step 3/3: RUN mkdir"), std::string::npos) << built.err;
  EXPECT_TRUE(buildBoxes().empty());
  ASSERT_EQ(daemon_->hutch({"run", "--name", "multi1", "--template", "multi"}).exit_code, 0);
  auto seen = daemon_->hutch({"exec", "multi1", "--", "sh", "-c",
                              "cat /opt/said /opt/app/lib/data.txt; readlink /opt/app/hi; "
                              "stat -c %a /opt/app/hello; test -e /src || echo no-src"});
  EXPECT_EQ(seen.out, "hello from the builder stage\ndata\nhello\n755\nno-src\n") << seen.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "multi1"}).exit_code, 0);
}

TEST_F(BuildTest, AFailingStepSaysWhichAndLeavesNothing) {
  write("Dockerfile", "FROM base\nRUN echo fine\nRUN echo about to fail >&2; exit 3\n");
  auto failed = build("broken");
  EXPECT_NE(failed.exit_code, 0);
  EXPECT_NE(failed.err.find("about to fail"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("Step 2"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("exit code 3"), std::string::npos) << failed.err;
  EXPECT_TRUE(templateNamed("broken").is_null());
  EXPECT_TRUE(buildBoxes().empty());

  // A Dockerfile hutchd cannot read: its line and what is wrong, before any box starts.
  write("Dockerfile", "FROM base\nRUNN echo typo\n");
  auto bad = build("broken");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("line 2"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("RUN"), std::string::npos) << bad.err;
  // A COPY of what the context does not have.
  write("Dockerfile", "FROM base\nCOPY missing.txt /\n");
  auto missing = build("broken");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("missing.txt"), std::string::npos) << missing.err;
  EXPECT_TRUE(templateNamed("broken").is_null());
  EXPECT_TRUE(buildBoxes().empty());
}

// A client that goes away stops its build: the RUN that runs is killed, the box removed, no
// template made (as `docker build` stops when its client is interrupted).
TEST_F(BuildTest, ABuildWhoseClientWentAwayStops) {
  // The step's text is in the log too: only its output says "run-began".
  write("Dockerfile", "FROM base\nRUN echo run-\"\"began; sleep 100000\n");
  const fs::path out = context_ / "out";
  const fs::path err = context_ / "err";
  pid_t cli = daemon_->start(
      {"template", "build", "left", "-f", (context_ / "Dockerfile").string(), context_.string(),
       "--memory", "512m", "--cpus", "1", "--disk", "2g", "--no-cache"},
      out, err);
  ASSERT_GT(cli, 0);
  ASSERT_TRUE(eventually([&] { return readFile(err).find("run-began") != std::string::npos; },
                         std::chrono::seconds(180)))
      << readFile(err);
  ASSERT_EQ(buildBoxes().size(), 1u);
  ::kill(cli, SIGKILL);
  collect(cli, out, err);
  // hutchd notices at its next keep-alive (5 s) and stops the build.
  EXPECT_TRUE(eventually([&] { return buildBoxes().empty(); }, std::chrono::seconds(120)))
      << buildBoxes().front();
  EXPECT_TRUE(templateNamed("left").is_null());
}

// RUN <<EOF with a #! line runs the body as a script with that interpreter (perl here, which
// /bin/sh could not run), as the USER, and leaves no script file behind.
TEST_F(BuildTest, AnExecutableHeredocRunsWithItsInterpreter) {
  write("Dockerfile",
        "FROM base\nRUN <<EOF\n#!/usr/bin/perl\nopen(my $f, '>', '/opt/perl') or die;\n"
        "print $f \"perl ran as $<\\n\";\nEOF\n");
  auto built = build("scripted");
  ASSERT_EQ(built.exit_code, 0) << built.err;
  ASSERT_EQ(daemon_->hutch({"run", "--name", "scripted1", "--template", "scripted"}).exit_code, 0);
  auto seen = daemon_->hutch(
      {"exec", "scripted1", "--", "sh", "-c", "cat /opt/perl; ls /tmp | grep -c hutch-run"});
  EXPECT_EQ(seen.out, "perl ran as 0\n0\n") << seen.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "scripted1"}).exit_code, 0);
}

// ADD of a local tar archive: unpacked into the destination by the box's own tar, keeping the
// archive's owners and modes; the archive itself is not left in the box.
TEST_F(BuildTest, AnAddedTarArchiveIsUnpackedInTheBox) {
  char tmpl[] = "/tmp/hutch-build-tree-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path tree = tmpl;
  fs::create_directories(tree / "bin");
  fs::create_directories(tree / "share");
  std::ofstream(tree / "bin" / "tool") << "#!/bin/sh\necho tool ran\n";
  fs::permissions(tree / "bin" / "tool", fs::perms(0755));
  std::ofstream(tree / "share" / "doc.txt") << "doc\n";
  const std::string tar = "tar --owner=1000 --group=1000 -czf " +
                          (context_ / "tools.tar.gz").string() + " -C " + tree.string() + " .";
  ASSERT_EQ(std::system(tar.c_str()), 0) << tar;
  fs::remove_all(tree);
  write("Dockerfile",
        "FROM base\nADD tools.tar.gz /opt/tools/\nRUN /opt/tools/bin/tool > /opt/ran\n");
  auto built = build("added");
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_TRUE(buildBoxes().empty());
  ASSERT_EQ(daemon_->hutch({"run", "--name", "added1", "--template", "added"}).exit_code, 0);
  auto seen = daemon_->hutch(
      {"exec", "added1", "--", "sh", "-c",
       "cat /opt/ran /opt/tools/share/doc.txt; stat -c '%u:%g %a' /opt/tools/bin/tool; "
       "ls -a /tmp | grep -c hutch-add; test -e /opt/tools/tools.tar.gz || echo no-archive"});
  EXPECT_EQ(seen.out, "tool ran\ndoc\n1000:1000 755\n0\nno-archive\n") << seen.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "added1"}).exit_code, 0);
}

TEST_F(BuildTest, AStartCommandRunsInEveryBoxOfTheTemplate) {
  write("Dockerfile", "FROM base\nRUN mkdir -p /srv\nWORKDIR /srv\n");
  auto built =
      build("service", {"--start-cmd", "echo started in $(pwd) > /tmp/started; exec sleep 100000",
                        "--ready-cmd", "test -f /tmp/started"});
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_EQ(templateNamed("service")["start"]["ready"], "test -f /tmp/started");
  // The box starts from the snapshot taken once ready: the process is there already.
  ASSERT_EQ(daemon_->hutch({"run", "--name", "svc1", "--template", "service"}).exit_code, 0);
  auto running = daemon_->hutch({"exec", "svc1", "--", "sh", "-c",
                                 "cat /tmp/started; pgrep -x sleep >/dev/null && echo running"});
  EXPECT_EQ(running.out, "started in /srv\nrunning\n") << running.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "svc1"}).exit_code, 0);
  // A box that boots cold (a larger disk than the snapshot's) starts it too, as a container
  // runs its CMD, and is made once the check passed.
  ASSERT_EQ(
      daemon_->hutch({"run", "--name", "svc2", "--template", "service", "--disk", "3G"}).exit_code,
      0);
  EXPECT_NE(daemon_->inspect("svc2").value("boot", "").find("cold"), std::string::npos)
      << daemon_->inspect("svc2").dump();
  auto cold = daemon_->hutch({"exec", "svc2", "--", "sh", "-c",
                              "cat /tmp/started; pgrep -x sleep >/dev/null && echo running"});
  EXPECT_EQ(cold.out, "started in /srv\nrunning\n") << cold.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "svc2"}).exit_code, 0);

  // A ready check that never passes fails the build (not a user's first create).
  auto never = build("never-ready", {"--start-cmd", "sleep 100000", "--ready-cmd", "false"});
  EXPECT_NE(never.exit_code, 0);
  EXPECT_NE(never.err.find("ready check"), std::string::npos) << never.err;
  EXPECT_TRUE(templateNamed("never-ready").is_null());
  EXPECT_TRUE(buildBoxes().empty());
}

}  // namespace
}  // namespace hutch::e2e

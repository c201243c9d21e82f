// planFromDockerfile and the build cache's keys, without a VM: what each Dockerfile instruction
// becomes, Docker's expansion with the base's ENV, and which changes change a step's key.
#include "box/dockerfile_plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "image/test_tar.h"

namespace hutch::box {
namespace {

namespace fs = std::filesystem;

class DockerfilePlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-plan-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "context");
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path context() const { return dir_ / "context"; }
  void write(const std::string& relative, const std::string& content) {
    fs::path path = context() / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
  }
  Result<std::vector<BuildStep>> steps(const DockerfileOptions& options = {},
                                       const std::vector<std::string>& base_env = {
                                           "PATH=/usr/bin:/bin"}) {
    auto plan = planFromDockerfile(context(), options);
    if (!plan) return fail(plan.error());
    plan_ = *plan;
    return plan->steps_from_base(base_env);
  }
  fs::path dir_;
  BuildPlan plan_;
};

TEST_F(DockerfilePlanTest, InstructionsBecomeStepsWithDockersExpansion) {
  write("Dockerfile", R"DF(ARG BASE=python:3.12-slim
FROM ${BASE} AS runtime
ARG VERSION=1
ENV APP=/srv/app PATH=/srv/app/bin:$PATH
WORKDIR $APP
COPY --chown=app:app --chmod=750 src/ lib/
RUN echo "$VERSION" > version
USER app
EXPOSE 8000 9000/udp
LABEL team="agents" version=$VERSION
CMD python -m app
)DF");
  write("src/a.py", "a\n");
  write("src/pkg/b.py", "b\n");
  DockerfileOptions options;
  options.build_args["VERSION"] = "2";
  auto made = steps(options);
  ASSERT_TRUE(made) << made.error().describe();
  EXPECT_EQ(plan_.base_image, "python:3.12-slim");
  EXPECT_EQ(plan_.base_template, "");  // a reference, not a template's name
  ASSERT_EQ(made->size(), 8u);
  const auto& env = (*made)[0];
  EXPECT_EQ(env.kind, BuildStep::Kind::kEnv);
  EXPECT_EQ(env.env, (std::vector<std::pair<std::string, std::string>>{
                         {"APP", "/srv/app"}, {"PATH", "/srv/app/bin:/usr/bin:/bin"}}));
  EXPECT_EQ((*made)[1].path, "/srv/app");
  const auto& copy = (*made)[2];
  EXPECT_EQ(copy.kind, BuildStep::Kind::kCopy);
  EXPECT_EQ(copy.chown, "app:app");
  std::map<std::string, CopyItem> items;
  for (const CopyItem& item : copy.items) items[item.target] = item;
  ASSERT_TRUE(items.contains("lib")) << copy.items.size();
  EXPECT_EQ(items["lib"].type, CopyItem::Type::kDirectory);
  EXPECT_EQ(items["lib"].mode, 0755u);  // the destination: --chmod is for what is copied
  ASSERT_TRUE(items.contains("lib/pkg/b.py"));
  EXPECT_EQ(items["lib/pkg/b.py"].mode, 0750u);
  EXPECT_EQ(items["lib/pkg/b.py"].source, context() / "src/pkg/b.py");
  const auto& run = (*made)[3];
  EXPECT_EQ(run.argv, (std::vector<std::string>{"/bin/sh", "-c", "echo \"$VERSION\" > version"}));
  // The build argument is in RUN's environment (the shell expands it), not in the template's.
  EXPECT_EQ(run.env, (std::vector<std::pair<std::string, std::string>>{{"VERSION", "2"}}));
  EXPECT_EQ((*made)[4].user, "app");
  EXPECT_EQ((*made)[5].config["exposed_ports"], nlohmann::json({"8000/tcp", "9000/udp"}));
  EXPECT_EQ((*made)[6].config["labels"]["version"], "2");
  EXPECT_EQ((*made)[7].config["cmd"], nlohmann::json({"/bin/sh", "-c", "python -m app"}));
}

TEST_F(DockerfilePlanTest, ANameOfNoRegistryMayBeATemplateAndStagesChain) {
  write("Dockerfile",
        "FROM base AS deps\nRUN echo deps\nFROM deps AS app\nRUN echo app\nFROM base\nRUN no\n");
  DockerfileOptions options;
  options.target = "app";
  auto made = steps(options);
  ASSERT_TRUE(made) << made.error().describe();
  EXPECT_EQ(plan_.base_template, "base");
  ASSERT_EQ(made->size(), 2u);
  EXPECT_EQ((*made)[0].argv.back(), "echo deps");
  EXPECT_EQ((*made)[1].argv.back(), "echo app");
}

TEST_F(DockerfilePlanTest, ACopyFromAStagePlansThatStageOnce) {
  write("Dockerfile", R"DF(FROM base AS builder
WORKDIR /src
RUN make
FROM python:3.12 AS unused
RUN never
FROM base
COPY --from=builder --chmod=755 out/app /usr/local/bin/
COPY --from=0 /src/lib /opt/lib
)DF");
  auto made = steps();
  ASSERT_TRUE(made) << made.error().describe();
  ASSERT_EQ(plan_.stages.size(), 1u);  // builder, once; the unused stage not at all
  EXPECT_EQ(plan_.stages[0].base_template, "base");
  ASSERT_TRUE(plan_.stages[0].steps_from_base);
  auto stage_steps = plan_.stages[0].steps_from_base({"PATH=/bin"});
  ASSERT_TRUE(stage_steps);
  EXPECT_EQ(stage_steps->size(), 2u);
  ASSERT_EQ(made->size(), 2u);
  ASSERT_TRUE((*made)[0].copy_from);
  EXPECT_EQ((*made)[0].copy_from->stage, 0u);
  EXPECT_EQ((*made)[0].copy_from->sources, std::vector<std::string>{"/out/app"});
  EXPECT_EQ((*made)[0].copy_from->dest, "/usr/local/bin/");
  EXPECT_EQ((*made)[0].copy_from->chmod, 0755u);
  ASSERT_TRUE((*made)[1].copy_from);
  EXPECT_EQ((*made)[1].copy_from->stage, 0u);
  EXPECT_EQ((*made)[1].copy_from->sources, std::vector<std::string>{"/src/lib"});
}

TEST_F(DockerfilePlanTest, WhatBuildsDoNotDoIsRefusedWithWhatToDoInstead) {
  write("Dockerfile", "FROM base\nCOPY --from=scratch /x /x\n");
  auto from = steps();
  ASSERT_FALSE(from);
  EXPECT_NE(from.error().message().find("line 2"), std::string::npos) << from.error().message();

  // FROM scratch is the empty image (TemplateService::createScratch), not a template.
  write("Dockerfile", "FROM scratch\nCOPY a /\n");
  write("a", "x");
  auto scratch = planFromDockerfile(context(), {});
  ASSERT_TRUE(scratch) << scratch.error().describe();
  EXPECT_EQ(scratch->base_image, "scratch");
  EXPECT_EQ(scratch->base_template, "");

  write("Dockerfile", "FROM base\nCOPY missing /\n");
  auto missing = steps();
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("missing"), std::string::npos);

  DockerfileOptions elsewhere;
  elsewhere.dockerfile = "../Dockerfile";
  EXPECT_FALSE(planFromDockerfile(context(), elsewhere));
  DockerfileOptions absent;
  absent.dockerfile = "build/Dockerfile";
  auto none = planFromDockerfile(context(), absent);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find("build/Dockerfile"), std::string::npos);
}

TEST_F(DockerfilePlanTest, ACopysKeyChangesWithItsContentNotItsTimes) {
  write("Dockerfile", "FROM base\nCOPY app.txt /app.txt\n");
  write("app.txt", "one\n");
  auto first = steps();
  ASSERT_TRUE(first) << first.error().describe();
  auto key1 = buildStepKey("parent", first->at(0));
  ASSERT_TRUE(key1);
  fs::last_write_time(context() / "app.txt",
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  auto key2 = buildStepKey("parent", first->at(0));
  EXPECT_EQ(*key1, *key2);
  write("app.txt", "two\n");
  auto key3 = buildStepKey("parent", first->at(0));
  EXPECT_NE(*key1, *key3);
  EXPECT_NE(*key1, *buildStepKey("other parent", first->at(0)));
}

// RUN <<EOF whose body starts with #!: the body is run as an executable file, so its #! line
// picks the interpreter; the body is in the step's key.
TEST_F(DockerfilePlanTest, AnExecutableHeredocRunsAsAScript) {
  write("Dockerfile", "FROM base\nRUN <<EOF\n#!/usr/bin/perl\nprint \"hi\\n\";\nEOF\n");
  auto made = steps();
  ASSERT_TRUE(made) << made.error().describe();
  ASSERT_EQ(made->size(), 1u);
  const BuildStep& run = made->at(0);
  EXPECT_EQ(run.kind, BuildStep::Kind::kRun);
  ASSERT_EQ(run.argv.size(), 3u);
  EXPECT_EQ(run.argv[0], "/bin/sh");
  EXPECT_NE(run.argv[2].find("\"$f\""), std::string::npos) << run.argv[2];
  ASSERT_EQ(run.env.size(), 1u);
  EXPECT_EQ(run.env[0].first, "HUTCH_RUN_SCRIPT");
  EXPECT_EQ(run.env[0].second, "#!/usr/bin/perl\nprint \"hi\\n\";\n");
}

// COPY --from an image: that image is a stage of its own with no steps (pulled as FROM pulls
// it), planned once however many COPYs name it.
TEST_F(DockerfilePlanTest, ACopyFromAnImagePlansItAsAStageWithNoSteps) {
  write("Dockerfile",
        "FROM base\nCOPY --from=registry.example/tools/uv:0.5 /uv /uvx /bin/\n"
        "COPY --from=registry.example/tools/uv:0.5 /licenses /usr/share/uv/\n");
  auto made = steps();
  ASSERT_TRUE(made) << made.error().describe();
  ASSERT_EQ(plan_.stages.size(), 1u);
  EXPECT_EQ(plan_.stages[0].base_image, "registry.example/tools/uv:0.5");
  EXPECT_TRUE(plan_.stages[0].base_template.empty());
  EXPECT_TRUE(plan_.stages[0].steps.empty());
  EXPECT_FALSE(plan_.stages[0].steps_from_base);
  ASSERT_EQ(made->size(), 2u);
  ASSERT_TRUE(made->at(0).copy_from);
  EXPECT_EQ(made->at(0).copy_from->stage, 0u);
  EXPECT_EQ(made->at(0).copy_from->sources, (std::vector<std::string>{"/uv", "/uvx"}));
  EXPECT_EQ(made->at(0).copy_from->dest, "/bin/");
  ASSERT_TRUE(made->at(1).copy_from);
  EXPECT_EQ(made->at(1).copy_from->stage, 0u);
}

// ADD of a local tar archive: one item that the builder unpacks in the box; a file that is not
// an archive is copied as it is; the archive's content is in the step's key.
TEST_F(DockerfilePlanTest, AnAddedTarArchiveIsUnpackedIntoItsDestination) {
  write("Dockerfile",
        "FROM base\nADD tools.tar.gz /opt/tools/\nADD notes.txt /opt/\nADD plain.tar /srv\n");
  using image::testing::file;
  write("tools.tar.gz", image::testing::makeTar({file("bin/tool", "#!/bin/sh\n", 0755)},
                                                image::Compression::kGzip));
  write("plain.tar", image::testing::makeTar({file("index.html", "<p>hi</p>\n")}));
  write("notes.txt", "not an archive\n");
  auto made = steps();
  ASSERT_TRUE(made) << made.error().describe();
  ASSERT_EQ(made->size(), 3u);
  const auto& tools = made->at(0).items;
  ASSERT_EQ(tools.size(), 2u);
  EXPECT_EQ(tools[0].type, CopyItem::Type::kDirectory);
  EXPECT_EQ(tools[0].target, "/opt/tools");
  EXPECT_EQ(tools[1].type, CopyItem::Type::kArchive);
  EXPECT_EQ(tools[1].source, context() / "tools.tar.gz");
  EXPECT_EQ(tools[1].target, "/opt/tools");
  ASSERT_EQ(made->at(1).items.size(), 2u);
  EXPECT_EQ(made->at(1).items[1].type, CopyItem::Type::kFile);
  EXPECT_EQ(made->at(1).items[1].target, "/opt/notes.txt");
  // Without a trailing slash the destination is still the directory it is unpacked into.
  ASSERT_EQ(made->at(2).items.size(), 1u);
  EXPECT_EQ(made->at(2).items[0].type, CopyItem::Type::kArchive);
  EXPECT_EQ(made->at(2).items[0].target, "/srv");

  auto key1 = buildStepKey("parent", made->at(0));
  write("tools.tar.gz", image::testing::makeTar({file("bin/tool", "#!/bin/sh\nexit 1\n", 0755)},
                                                image::Compression::kGzip));
  auto key2 = buildStepKey("parent", made->at(0));
  ASSERT_TRUE(key1 && key2);
  EXPECT_NE(*key1, *key2);

  // --chown and --chmod would not reach what the archive holds: refused, saying what to do.
  write("Dockerfile", "FROM base\nADD --chown=1000:1000 tools.tar.gz /opt/tools/\n");
  auto chown = steps();
  ASSERT_FALSE(chown);
  EXPECT_EQ(chown.error().code(), Errc::kUnsupported);
  EXPECT_NE(chown.error().message().find("RUN chown -R"), std::string::npos)
      << chown.error().message();
  // ADD --unpack=false copies the archive as a file.
  write("Dockerfile", "FROM base\nADD --unpack=false tools.tar.gz /opt/\n");
  auto kept = steps();
  ASSERT_TRUE(kept) << kept.error().describe();
  EXPECT_EQ(kept->at(0).items.back().type, CopyItem::Type::kFile);
  EXPECT_EQ(kept->at(0).items.back().target, "/opt/tools.tar.gz");
}

}  // namespace
}  // namespace hutch::box

#include "build/dockerfile.h"

#include <gtest/gtest.h>

#include <map>

namespace hutch::build {
namespace {

Dockerfile parse(std::string_view text) {
  auto df = parseDockerfile(text);
  EXPECT_TRUE(df) << (df ? "" : df.error().message());
  return df ? *df : Dockerfile{};
}

// The message of the error parsing `text` gives, checking its code.
std::string parseError(std::string_view text, Errc code = Errc::kInvalidArgument) {
  auto df = parseDockerfile(text);
  EXPECT_FALSE(df) << text;
  if (df) return "";
  EXPECT_EQ(df.error().code(), code) << df.error().message();
  return df.error().message();
}

std::string expanded(std::string_view word, const std::map<std::string, std::string>& env = {},
                     char escape = '\\') {
  auto out = expandWord(
      word,
      [&](std::string_view name) -> std::optional<std::string> {
        auto it = env.find(std::string(name));
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      escape);
  EXPECT_TRUE(out) << word << ": " << (out ? "" : out.error().message());
  return out ? *out : "";
}

template <class T>
const T& payload(const Instruction& ins) {
  const T* p = ins.as<T>();
  EXPECT_NE(p, nullptr) << ins.original;
  static const T empty{};
  return p != nullptr ? *p : empty;
}

constexpr std::string_view kPython = R"(# syntax=docker/dockerfile:1.7
ARG PYTHON_VERSION=3.12

FROM python:${PYTHON_VERSION}-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /app
RUN --network=default apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
    # a comment inside the continuation
 && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY --chown=app:app . .
EXPOSE 8000
USER app
CMD ["gunicorn", "-b", "0.0.0.0:8000", "app:app"]
)";

TEST(DockerfileTest, PythonApp) {
  const Dockerfile df = parse(kPython);
  EXPECT_EQ(df.syntax, "docker/dockerfile:1.7");
  EXPECT_EQ(df.escape, '\\');
  ASSERT_EQ(df.global_args.size(), 1u);
  EXPECT_EQ(df.global_args[0].line, 2);
  const Arg& arg = payload<Arg>(df.global_args[0]);
  ASSERT_EQ(arg.args.size(), 1u);
  EXPECT_EQ(arg.args[0].name, "PYTHON_VERSION");
  EXPECT_EQ(arg.args[0].default_value, "3.12");

  ASSERT_EQ(df.stages.size(), 1u);
  const Stage& stage = df.stages[0];
  EXPECT_EQ(stage.name, "base");
  EXPECT_EQ(stage.index, 0u);
  EXPECT_EQ(stage.base().image, "python:${PYTHON_VERSION}-slim");
  EXPECT_EQ(expanded(stage.base().image, {{"PYTHON_VERSION", "3.12"}}), "python:3.12-slim");
  EXPECT_EQ(stage.from.line, 4);
  ASSERT_EQ(stage.instructions.size(), 9u);

  const Instruction& env = stage.instructions[0];
  EXPECT_EQ(env.keyword, Keyword::kEnv);
  EXPECT_EQ(env.line, 5);
  EXPECT_EQ(env.end_line, 6);
  EXPECT_EQ(payload<Env>(env).pairs,
            (std::vector<KeyValue>{{"PYTHONDONTWRITEBYTECODE", "1"}, {"PYTHONUNBUFFERED", "1"}}));

  EXPECT_EQ(payload<Workdir>(stage.instructions[1]).path, "/app");

  const Instruction& run = stage.instructions[2];
  EXPECT_EQ(run.line, 8);
  EXPECT_EQ(run.end_line, 11);
  const build::Run& r = payload<build::Run>(run);
  EXPECT_FALSE(r.command.json_form);
  EXPECT_EQ(r.command.shell,
            "apt-get update  && apt-get install -y --no-install-recommends build-essential  && "
            "rm -rf /var/lib/apt/lists/*");
  EXPECT_EQ(run.original,
            "RUN --network=default apt-get update  && apt-get install -y --no-install-recommends "
            "build-essential  && rm -rf /var/lib/apt/lists/*");

  const Copy& req = payload<Copy>(stage.instructions[3]);
  EXPECT_EQ(req.sources, (std::vector<std::string>{"requirements.txt"}));
  EXPECT_EQ(req.dest, ".");
  EXPECT_FALSE(req.is_add);
  EXPECT_TRUE(req.from.empty());

  const Copy& all = payload<Copy>(stage.instructions[5]);
  EXPECT_EQ(all.chown, "app:app");
  EXPECT_EQ(all.sources, (std::vector<std::string>{"."}));

  EXPECT_EQ(payload<Expose>(stage.instructions[6]).ports, (std::vector<std::string>{"8000"}));
  EXPECT_EQ(payload<User>(stage.instructions[7]).user, "app");
  const Cmd& cmd = payload<Cmd>(stage.instructions[8]);
  EXPECT_TRUE(cmd.command.json_form);
  EXPECT_EQ(cmd.command.argv,
            (std::vector<std::string>{"gunicorn", "-b", "0.0.0.0:8000", "app:app"}));
}

constexpr std::string_view kNode = R"(FROM node:20-alpine AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci

FROM node:20-alpine AS Build
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY . .
RUN npm run build

FROM --platform=$BUILDPLATFORM nginx:1.27-alpine
COPY --from=BUILD /app/dist /usr/share/nginx/html
COPY --from=0 /app/package.json /tmp/
COPY --from=busybox:1.36 /bin/busybox /bin/
EXPOSE 80/tcp 443
HEALTHCHECK --interval=30s --timeout=3s --start-period=1m30s --retries=3 \
  CMD wget -qO- http://localhost/ || exit 1
STOPSIGNAL SIGQUIT
)";

TEST(DockerfileTest, NodeMultiStage) {
  const Dockerfile df = parse(kNode);
  ASSERT_EQ(df.stages.size(), 3u);
  EXPECT_EQ(df.stages[0].name, "deps");
  EXPECT_EQ(df.stages[1].name, "build");  // stage names are lower case
  EXPECT_EQ(df.stages[2].name, "");
  EXPECT_EQ(df.stages[2].base().platform, "$BUILDPLATFORM");
  EXPECT_EQ(df.stages[2].base().image, "nginx:1.27-alpine");

  const Copy& deps = payload<Copy>(df.stages[0].instructions[1]);
  EXPECT_EQ(deps.sources, (std::vector<std::string>{"package.json", "package-lock.json"}));
  EXPECT_EQ(deps.dest, "./");

  const Copy& from_deps = payload<Copy>(df.stages[1].instructions[1]);
  EXPECT_EQ(from_deps.from, "deps");
  EXPECT_EQ(from_deps.from_stage, 0u);

  const auto& last = df.stages[2].instructions;
  EXPECT_EQ(payload<Copy>(last[0]).from_stage, 1u);  // by name, any case
  EXPECT_EQ(payload<Copy>(last[1]).from_stage, 0u);  // by index
  EXPECT_EQ(payload<Copy>(last[2]).from, "busybox:1.36");
  EXPECT_FALSE(payload<Copy>(last[2]).from_stage);  // an image
  EXPECT_EQ(payload<Expose>(last[3]).ports, (std::vector<std::string>{"80/tcp", "443"}));

  const Healthcheck& hc = payload<Healthcheck>(last[4]);
  EXPECT_EQ(hc.test,
            (std::vector<std::string>{"CMD-SHELL", "wget -qO- http://localhost/ || exit 1"}));
  EXPECT_EQ(hc.interval_ns, 30'000'000'000);
  EXPECT_EQ(hc.timeout_ns, 3'000'000'000);
  EXPECT_EQ(hc.start_period_ns, 90'000'000'000);
  EXPECT_EQ(hc.start_interval_ns, 0);
  EXPECT_EQ(hc.retries, 3);
  EXPECT_EQ(hc.raw,
            "--interval=30s --timeout=3s --start-period=1m30s --retries=3   CMD wget -qO- "
            "http://localhost/ || exit 1");
  EXPECT_EQ(payload<StopSignal>(last[5]).signal, "SIGQUIT");

  EXPECT_EQ(df.findStage("DEPS", 3), 0u);
  EXPECT_EQ(df.findStage("build", 1), std::nullopt);  // not before stage 1
  EXPECT_EQ(df.findStage("1", 2), 1u);
  EXPECT_EQ(df.findStage("2", 2), std::nullopt);
  EXPECT_EQ(df.findStage("nginx", 3), std::nullopt);
  EXPECT_EQ(df.findStage("", 3), std::nullopt);
  EXPECT_EQ(df.findStage("99999999999999999999", 3), std::nullopt);
}

constexpr std::string_view kDevcontainer =
    "FROM mcr.microsoft.com/devcontainers/base:bookworm\n"
    "ARG USERNAME=vscode\n"
    "ARG USER_UID=1000 USER_GID=$USER_UID\n"
    "LABEL org.opencontainers.image.source=\"https://github.com/x/y\" \\\n"
    "      description='A dev box'\n"
    "MAINTAINER Jane \"JD\" Doe <jane@example.com>\n"
    "SHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]\n"
    "RUN <<EOF\n"
    "set -eux\n"
    "apt-get update\n"
    "EOF\n"
    "RUN <<-'SCRIPT' bash\n"
    "\techo \"$HOME\"\n"
    "\tSCRIPT\n"
    "COPY <<EOF /etc/motd\n"
    "Welcome ${USERNAME}\n"
    "EOF\n"
    "COPY --chmod=755 <<\"EOF\" /usr/local/bin/hello\n"
    "#!/bin/sh\n"
    "echo $1\n"
    "EOF\n"
    "RUN <<EOF\n"
    "#!/usr/bin/env python3\n"
    "print('hi')\n"
    "EOF\n"
    "RUN cat <<A > /a && cat <<B > /b\n"
    "first\n"
    "A\n"
    "second\n"
    "B\n"
    "ENV LEGACY value with  spaces\n"
    "ENTRYPOINT /usr/local/bin/start.sh --flag\n"
    "VOLUME [\"/data\", \"/cache\"]\n"
    "VOLUME /logs /tmp/x\n"
    "USER ${USERNAME}\n"
    "WORKDIR /home/$USERNAME\n"
    "ADD --chmod=755 tools.tar.gz /opt/tools/\n"
    "ADD --unpack=false --link payload.tar /srv/\n";

TEST(DockerfileTest, DevcontainerWithHeredocs) {
  const Dockerfile df = parse(kDevcontainer);
  ASSERT_EQ(df.stages.size(), 1u);
  const auto& ins = df.stages[0].instructions;
  ASSERT_EQ(ins.size(), 19u);

  const Arg& ids = payload<Arg>(ins[1]);
  ASSERT_EQ(ids.args.size(), 2u);
  EXPECT_EQ(ids.args[1].name, "USER_GID");
  EXPECT_EQ(ids.args[1].default_value, "$USER_UID");

  const Label& label = payload<Label>(ins[2]);
  ASSERT_EQ(label.pairs.size(), 2u);
  EXPECT_EQ(label.pairs[0].value, "\"https://github.com/x/y\"");
  EXPECT_EQ(expanded(label.pairs[0].value), "https://github.com/x/y");
  EXPECT_EQ(expanded(label.pairs[1].value), "A dev box");

  EXPECT_EQ(ins[3].keyword, Keyword::kMaintainer);
  const Label& maintainer = payload<Label>(ins[3]);
  ASSERT_EQ(maintainer.pairs.size(), 1u);
  EXPECT_EQ(maintainer.pairs[0].key, "maintainer");
  EXPECT_EQ(expanded(maintainer.pairs[0].value), "Jane \"JD\" Doe <jane@example.com>");

  EXPECT_EQ(payload<Shell>(ins[4]).argv,
            (std::vector<std::string>{"/bin/bash", "-o", "pipefail", "-c"}));

  const build::Run& script = payload<build::Run>(ins[5]);
  EXPECT_EQ(ins[5].line, 8);
  EXPECT_EQ(ins[5].end_line, 11);
  EXPECT_EQ(ins[5].original, "RUN <<EOF");
  EXPECT_EQ(script.command.shell, "set -eux\napt-get update\n");
  EXPECT_FALSE(script.executable_script);
  ASSERT_EQ(script.heredocs.size(), 1u);
  EXPECT_EQ(script.heredocs[0].name, "EOF");
  EXPECT_TRUE(script.heredocs[0].expand);

  // <<- with a quoted delimiter and a command: the shell reads the body as written.
  const build::Run& bash = payload<build::Run>(ins[6]);
  EXPECT_EQ(bash.command.shell, "<<-'SCRIPT' bash\n\techo \"$HOME\"\nSCRIPT");
  ASSERT_EQ(bash.heredocs.size(), 1u);
  EXPECT_EQ(bash.heredocs[0].name, "SCRIPT");
  EXPECT_TRUE(bash.heredocs[0].chomp);
  EXPECT_FALSE(bash.heredocs[0].expand);
  EXPECT_EQ(bash.heredocs[0].content, "echo \"$HOME\"\n");

  const Copy& motd = payload<Copy>(ins[7]);
  EXPECT_TRUE(motd.sources.empty());
  ASSERT_EQ(motd.inline_files.size(), 1u);
  EXPECT_EQ(motd.inline_files[0].name, "EOF");
  EXPECT_EQ(motd.inline_files[0].content, "Welcome ${USERNAME}\n");
  EXPECT_TRUE(motd.inline_files[0].expand);
  EXPECT_EQ(motd.dest, "/etc/motd");

  const Copy& hello = payload<Copy>(ins[8]);
  EXPECT_EQ(hello.chmod, "755");
  ASSERT_EQ(hello.inline_files.size(), 1u);
  EXPECT_FALSE(hello.inline_files[0].expand);
  EXPECT_EQ(hello.inline_files[0].content, "#!/bin/sh\necho $1\n");

  const build::Run& python = payload<build::Run>(ins[9]);
  EXPECT_TRUE(python.executable_script);
  EXPECT_EQ(python.command.shell, "#!/usr/bin/env python3\nprint('hi')\n");

  const build::Run& two = payload<build::Run>(ins[10]);
  ASSERT_EQ(two.heredocs.size(), 2u);
  EXPECT_EQ(two.command.shell, "cat <<A > /a && cat <<B > /b\nfirst\nA\nsecond\nB");
  EXPECT_EQ(ins[10].end_line, 30);

  EXPECT_EQ(payload<Env>(ins[11]).pairs, (std::vector<KeyValue>{{"LEGACY", "value with  spaces"}}));
  const Entrypoint& ep = payload<Entrypoint>(ins[12]);
  EXPECT_FALSE(ep.command.json_form);
  EXPECT_EQ(ep.command.shell, "/usr/local/bin/start.sh --flag");
  EXPECT_EQ(payload<Volume>(ins[13]).paths, (std::vector<std::string>{"/data", "/cache"}));
  EXPECT_EQ(payload<Volume>(ins[14]).paths, (std::vector<std::string>{"/logs", "/tmp/x"}));
  EXPECT_EQ(payload<User>(ins[15]).user, "${USERNAME}");
  EXPECT_EQ(payload<Workdir>(ins[16]).path, "/home/$USERNAME");

  const Copy& tools = payload<Copy>(ins[17]);
  EXPECT_TRUE(tools.is_add);
  EXPECT_EQ(tools.unpack, std::nullopt);
  EXPECT_EQ(tools.dest, "/opt/tools/");
  const Copy& payload_tar = payload<Copy>(ins[18]);
  EXPECT_EQ(payload_tar.unpack, false);
  EXPECT_TRUE(payload_tar.link);
}

TEST(DockerfileTest, EscapeDirectiveBacktick) {
  const Dockerfile df = parse(
      "# escape=`\n"
      "\n"
      "FROM mcr.microsoft.com/windows/servercore\n"
      "COPY testfile.txt c:\\\n"
      "RUN dir c:\\ `\n"
      "    && echo done\n"
      "ENV P=\"a`\"b\"\n");
  EXPECT_EQ(df.escape, '`');
  const auto& ins = df.stages[0].instructions;
  ASSERT_EQ(ins.size(), 3u);
  EXPECT_EQ(payload<Copy>(ins[0]).dest, "c:\\");
  EXPECT_EQ(payload<build::Run>(ins[1]).command.shell, "dir c:\\     && echo done");
  EXPECT_EQ(expanded(payload<Env>(ins[2]).pairs[0].value, {}, df.escape), "a\"b");
}

TEST(DockerfileTest, Directives) {
  // Case, blanks and BOM are fine; `check` is accepted and ignored.
  Dockerfile df = parse(
      "\xEF\xBB\xBF#  SYNTAX = docker/dockerfile:1  \n# Check=skip=all\n"
      "#escape=`\nFROM alpine\nRUN echo `\n  hi\n");
  EXPECT_EQ(df.syntax, "docker/dockerfile:1");
  EXPECT_EQ(df.escape, '`');
  EXPECT_EQ(payload<build::Run>(df.stages[0].instructions[0]).command.shell, "echo   hi");
  // After a comment, a blank line or an instruction, a directive is a comment.
  df = parse("# hello\n# escape=`\nFROM alpine\nRUN a \\\n b\n");
  EXPECT_EQ(df.escape, '\\');
  EXPECT_EQ(payload<build::Run>(df.stages[0].instructions[0]).command.shell, "a  b");
  df = parse("\n# escape=`\nFROM alpine\n");
  EXPECT_EQ(df.escape, '\\');
  df = parse("# unknown=1\n# escape=`\nFROM alpine\n");
  EXPECT_EQ(df.escape, '\\');
  df = parse("FROM alpine\n# escape=`\n# escape=x\n");
  EXPECT_EQ(df.escape, '\\');

  EXPECT_EQ(parseError("# escape=`\n# escape=\\\nFROM alpine\n"),
            "Dockerfile line 2: the escape parser directive is given twice: keep one");
  EXPECT_EQ(parseError("# escape=x\nFROM alpine\n"),
            "Dockerfile line 1: the escape directive takes \\ or ` (backtick), not 'x'");
  EXPECT_EQ(parseError("# syntax=a\n#syntax=b\nFROM alpine\n"),
            "Dockerfile line 2: the syntax parser directive is given twice: keep one");
}

TEST(DockerfileTest, ContinuationsAndComments) {
  const Dockerfile df = parse(
      "  # indented comment\n"
      "FROM alpine\n"
      "RUN echo a \\\n"
      "\n"
      "    # comment between\n"
      "  \t \n"
      "    b \\   \n"
      "    c\n"
      "RUN echo \\\\\n"
      "RUN echo 'we are running some # of cool things'\n"
      "  RUN   indented\r\n"
      "run lower \\\r\n"
      "  case\r\n"
      "RUN \\\n"
      "  split\n"
      "RUN last \\");
  const auto& ins = df.stages[0].instructions;
  ASSERT_EQ(ins.size(), 7u);
  EXPECT_EQ(payload<build::Run>(ins[0]).command.shell, "echo a     b     c");
  EXPECT_EQ(ins[0].line, 3);
  EXPECT_EQ(ins[0].end_line, 8);
  EXPECT_EQ(payload<build::Run>(ins[1]).command.shell,
            "echo \\\\");  // an escaped escape ends the line
  EXPECT_EQ(payload<build::Run>(ins[2]).command.shell,
            "echo 'we are running some # of cool things'");
  EXPECT_EQ(payload<build::Run>(ins[3]).command.shell, "indented");
  EXPECT_EQ(ins[4].keyword, Keyword::kRun);
  EXPECT_EQ(payload<build::Run>(ins[4]).command.shell, "lower   case");
  EXPECT_EQ(ins[4].original, "run lower   case");
  EXPECT_EQ(payload<build::Run>(ins[5]).command.shell, "split");
  EXPECT_EQ(payload<build::Run>(ins[6]).command.shell,
            "last");  // a continuation at the end of file
  EXPECT_EQ(ins[6].end_line, 16);
}

TEST(DockerfileTest, KeywordsInAnyCase) {
  const Dockerfile df = parse("from alpine As Builder\nrUn true\nCopy a b\nworkDIR /x\n");
  EXPECT_EQ(df.stages[0].name, "builder");
  const auto& ins = df.stages[0].instructions;
  EXPECT_EQ(ins[0].keyword, Keyword::kRun);
  EXPECT_EQ(ins[1].keyword, Keyword::kCopy);
  EXPECT_EQ(ins[2].keyword, Keyword::kWorkdir);
}

TEST(DockerfileTest, ExecAndShellForms) {
  const Dockerfile df = parse(
      "FROM alpine\n"
      "RUN [\"echo\", \"a b\", \"\\u00e9\\n\"]\n"
      "RUN [ \"echo\", 'single' ]\n"
      "RUN [\"echo\"] && true\n"
      "RUN [not json\n"
      "CMD []\n"
      "ENTRYPOINT [\"/entry\"]\n"
      "ENTRYPOINT []\n"
      "COPY [\"a b.txt\", \"c\", \"/dst/\"]\n"
      "CMD echo $HOME\n");
  const auto& ins = df.stages[0].instructions;
  const build::Run& json = payload<build::Run>(ins[0]);
  EXPECT_TRUE(json.command.json_form);
  EXPECT_EQ(json.command.argv, (std::vector<std::string>{"echo", "a b", "\u00e9\n"}));
  EXPECT_FALSE(payload<build::Run>(ins[1]).command.json_form);  // not JSON: shell form
  EXPECT_EQ(payload<build::Run>(ins[1]).command.shell, "[ \"echo\", 'single' ]");
  EXPECT_FALSE(payload<build::Run>(ins[2]).command.json_form);
  EXPECT_FALSE(payload<build::Run>(ins[3]).command.json_form);
  EXPECT_TRUE(payload<Cmd>(ins[4]).command.json_form);
  EXPECT_TRUE(payload<Cmd>(ins[4]).command.argv.empty());
  EXPECT_EQ(payload<Entrypoint>(ins[5]).command.argv, (std::vector<std::string>{"/entry"}));
  EXPECT_TRUE(payload<Entrypoint>(ins[6]).command.argv.empty());
  const Copy& copy = payload<Copy>(ins[7]);
  EXPECT_TRUE(copy.json_form);
  EXPECT_EQ(copy.sources, (std::vector<std::string>{"a b.txt", "c"}));
  EXPECT_EQ(copy.dest, "/dst/");
  EXPECT_EQ(payload<Cmd>(ins[8]).command.shell, "echo $HOME");  // never expanded by the builder
}

TEST(DockerfileTest, EnvForms) {
  const Dockerfile df = parse(
      "FROM alpine\n"
      "ENV A=1 B=\"two words\" C='$x' D=\\$y E= F=\"\"\n"
      "ENV G a \"b c\"\n"
      "ENV H=\"multi \\\n"
      "line\"\n");
  const auto& ins = df.stages[0].instructions;
  const Env& env = payload<Env>(ins[0]);
  ASSERT_EQ(env.pairs.size(), 6u);
  EXPECT_EQ(expanded(env.pairs[1].value), "two words");
  EXPECT_EQ(expanded(env.pairs[2].value, {{"x", "no"}}), "$x");
  EXPECT_EQ(expanded(env.pairs[3].value, {{"y", "no"}}), "$y");
  EXPECT_EQ(env.pairs[4].value, "");
  EXPECT_EQ(expanded(env.pairs[5].value), "");
  const Env& legacy = payload<Env>(ins[1]);
  ASSERT_EQ(legacy.pairs.size(), 1u);
  EXPECT_EQ(legacy.pairs[0].key, "G");
  EXPECT_EQ(expanded(legacy.pairs[0].value), "a b c");
  EXPECT_EQ(expanded(payload<Env>(ins[2]).pairs[0].value), "multi line");
}

TEST(DockerfileTest, HeredocDetails) {
  const Dockerfile df = parse(
      "FROM alpine\n"
      "RUN <<EOF\r\n"
      "windows line\r\n"
      "EOF\r\n"
      "RUN 3<<EOF cat /dev/fd/3\n"
      "x\n"
      "EOF\n"
      "RUN echo \"<<NOT\" '<<NOT' \\<<NOT\n"
      "RUN [\"cat\", \"<<NOT\"]\n"
      "COPY <<one <<two /dir/\n"
      "1\n"
      "one\n"
      "2\n"
      "two\n"
      "RUN <<-EOF\n"
      "\t\tindented\n"
      "\tEOF\n"
      "RUN << EOF\n"
      "spaced\n"
      "EOF\n"
      "RUN <<EOF\n"
      "EOF\n"
      "ADD <<EOF --not-a-flag /x\n"
      "body\n"
      "EOF\n");
  const auto& ins = df.stages[0].instructions;
  EXPECT_EQ(payload<build::Run>(ins[0]).command.shell, "windows line\r\n");
  EXPECT_EQ(payload<build::Run>(ins[1]).command.shell, "3<<EOF cat /dev/fd/3\nx\nEOF");
  EXPECT_EQ(payload<build::Run>(ins[2]).heredocs.size(), 0u);
  EXPECT_EQ(payload<build::Run>(ins[3]).heredocs.size(), 0u);
  const Copy& two = payload<Copy>(ins[4]);
  ASSERT_EQ(two.inline_files.size(), 2u);
  EXPECT_EQ(two.inline_files[0].name, "one");
  EXPECT_EQ(two.inline_files[0].content, "1\n");
  EXPECT_EQ(two.inline_files[1].content, "2\n");
  EXPECT_EQ(payload<build::Run>(ins[5]).command.shell, "indented\n");
  EXPECT_EQ(payload<build::Run>(ins[6]).command.shell, "spaced\n");
  EXPECT_EQ(payload<build::Run>(ins[7]).command.shell, "");  // an empty body
  const Copy& add = payload<Copy>(ins[8]);
  EXPECT_EQ(add.sources, (std::vector<std::string>{"--not-a-flag"}));
  EXPECT_EQ(add.inline_files.size(), 1u);
}

TEST(DockerfileTest, GlobalArgsAndStages) {
  const Dockerfile df = parse(
      "ARG BASE=debian:12\n"
      "ARG VARIANT\n"
      "FROM ${BASE} AS one\n"
      "ARG VARIANT\n"
      "FROM one\n"
      "FROM scratch\n");
  ASSERT_EQ(df.global_args.size(), 2u);
  ASSERT_EQ(df.stages.size(), 3u);
  EXPECT_EQ(df.stages[0].instructions.size(), 1u);
  EXPECT_EQ(payload<Arg>(df.global_args[1]).args[0].default_value, std::nullopt);
  EXPECT_EQ(df.findStage(df.stages[1].base().image, 1), 0u);
  EXPECT_EQ(df.stages[2].base().image, "scratch");
}

TEST(DockerfileTest, KeywordHelpers) {
  EXPECT_EQ(keywordName(Keyword::kHealthcheck), "HEALTHCHECK");
  EXPECT_EQ(keywordName(Keyword::kStopSignal), "STOPSIGNAL");
  for (Keyword k : {Keyword::kAdd, Keyword::kCopy, Keyword::kEnv, Keyword::kExpose, Keyword::kFrom,
                    Keyword::kLabel, Keyword::kStopSignal, Keyword::kUser, Keyword::kVolume,
                    Keyword::kWorkdir, Keyword::kArg}) {
    EXPECT_TRUE(expandsVariables(k)) << keywordName(k);
  }
  for (Keyword k : {Keyword::kRun, Keyword::kCmd, Keyword::kEntrypoint, Keyword::kShell,
                    Keyword::kHealthcheck, Keyword::kMaintainer}) {
    EXPECT_FALSE(expandsVariables(k)) << keywordName(k);
  }
}

TEST(DockerfileTest, NormalizesPorts) {
  auto ports = normalizePorts({"80", "53/UDP", "8000-8002/tcp", "80/tcp", "9/sctp", "7-7"});
  ASSERT_TRUE(ports) << ports.error().message();
  EXPECT_EQ(*ports, (std::vector<std::string>{"80/tcp", "53/udp", "8000/tcp", "8001/tcp",
                                              "8002/tcp", "9/sctp", "7/tcp"}));
  const std::map<std::string, std::string> bad = {
      {"http", "a port is a number from 0 to 65535"},
      {"70000", "a port is a number from 0 to 65535"},
      {"-1", "a port is a number from 0 to 65535"},
      {"", "a port is a number from 0 to 65535"},
      {"80/xyz", "the protocol must be tcp, udp or sctp"},
      {"90-80", "the range ends before it starts"},
      {"1.2.3.4:80:80", "host addresses and ports are chosen when a box runs, not in the image"},
      {"8080:80", "host addresses and ports are chosen when a box runs, not in the image"},
  };
  for (const auto& [word, why] : bad) {
    auto out = normalizePorts({word});
    ASSERT_FALSE(out) << word;
    EXPECT_EQ(out.error().message(), "'" + word + "' is not a port to EXPOSE: " + why +
                                         "; write 8000, 8000/udp or 8000-8010/tcp");
  }
  std::vector<std::string> many(20, "0-65535");
  auto too_many = normalizePorts(many);
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().message(), "EXPOSE lists more than 1048576 ports: list fewer");
}

// ---- errors ----

TEST(DockerfileErrorTest, UnknownInstructions) {
  EXPECT_EQ(parseError("FROM alpine\nRUNN echo\n"),
            "Dockerfile line 2: unknown instruction 'RUNN' (did you mean RUN?)");
  EXPECT_EQ(parseError("FROM alpine\ncopyy a b\n"),
            "Dockerfile line 2: unknown instruction 'copyy' (did you mean COPY?)");
  EXPECT_EQ(parseError("FROM alpine\nFOOBARBAZ x\n"),
            "Dockerfile line 2: unknown instruction 'FOOBARBAZ' (instructions are FROM, RUN, "
            "COPY, ADD, ENV, ARG, WORKDIR, USER, CMD, ENTRYPOINT, EXPOSE, LABEL, VOLUME, SHELL, "
            "STOPSIGNAL, HEALTHCHECK)");
  EXPECT_EQ(parseError("FROM alpine\n" + std::string(100, 'X') + "\n"),
            "Dockerfile line 2: unknown instruction '" + std::string(60, 'X') + "...'");
  EXPECT_EQ(parseError("FROM alpine\nONBUILD RUN make\n", Errc::kUnsupported),
            "Dockerfile line 2: ONBUILD is not supported by hutch builds (it only acts in builds "
            "FROM this image): remove it, or put its instruction in the Dockerfile that needs it");
}

TEST(DockerfileErrorTest, Structure) {
  EXPECT_EQ(parseError(""), "The Dockerfile has no instructions: start it with FROM <image>");
  EXPECT_EQ(parseError("# only\n\n# comments\n"),
            "The Dockerfile has no instructions: start it with FROM <image>");
  EXPECT_EQ(parseError("ARG A=1\n"),
            "The Dockerfile has no FROM instruction: start the build with FROM <image> (only ARG "
            "may come before it)");
  EXPECT_EQ(parseError("ARG A=1\nRUN true\nFROM alpine\n"),
            "Dockerfile line 2: RUN comes before the first FROM: a Dockerfile starts with FROM "
            "<image> (only ARG may come before it)");
  EXPECT_EQ(parseError("FROM\n"),
            "Dockerfile line 1: FROM takes an image and optionally a stage name: FROM image [AS "
            "name], not 'FROM '");
  EXPECT_EQ(parseError("FROM a AS\n"),
            "Dockerfile line 1: FROM takes an image and optionally a stage name: FROM image [AS "
            "name], not 'FROM a AS'");
  EXPECT_EQ(parseError("FROM a FOR b\n"),
            "Dockerfile line 1: FROM takes an image and optionally a stage name: FROM image [AS "
            "name], not 'FROM a FOR b'");
  EXPECT_EQ(parseError("FROM a AS 1st\n"),
            "Dockerfile line 1: '1st' is not a valid stage name: start it with a letter and use "
            "letters, digits, '-', '_' and '.'");
  EXPECT_EQ(parseError("FROM a AS b/c\n"),
            "Dockerfile line 1: 'b/c' is not a valid stage name: start it with a letter and use "
            "letters, digits, '-', '_' and '.'");
  EXPECT_EQ(parseError("FROM a AS Scratch\n"),
            "Dockerfile line 1: 'scratch' is reserved and cannot name a stage: choose another "
            "name");
  EXPECT_EQ(parseError("FROM a AS x\nFROM b AS X\n"),
            "Dockerfile line 2: the stage name 'x' is already used on line 1: stage names must be "
            "unique");
  EXPECT_EQ(parseError("FROM --platfrom=linux/amd64 a\n"),
            "Dockerfile line 1: FROM has no flag --platfrom (its flags are --platform)");
}

TEST(DockerfileErrorTest, RunFlags) {
  EXPECT_EQ(parseError("FROM a\nRUN --mount=type=cache,target=/root/.cache pip install x\n",
                       Errc::kUnsupported),
            "Dockerfile line 2: RUN --mount is not supported by hutch builds: COPY what the step "
            "needs into the image first (a cache directory can live in the image, or be cleaned "
            "in the same RUN)");
  EXPECT_EQ(parseError("FROM a\nRUN --network=none make\n", Errc::kUnsupported),
            "Dockerfile line 2: RUN --network=none is not supported by hutch builds: steps use "
            "the build box's network; remove the flag");
  EXPECT_EQ(parseError("FROM a\nRUN --security=insecure make\n", Errc::kUnsupported),
            "Dockerfile line 2: RUN --security=insecure is not supported by hutch builds: steps "
            "run as in a normal box; remove the flag");
  EXPECT_EQ(parseError("FROM a\nRUN --device=/dev/kvm make\n", Errc::kUnsupported),
            "Dockerfile line 2: RUN --device is not supported by hutch builds: remove the flag");
  EXPECT_EQ(parseError("FROM a\nRUN --foo make\n"),
            "Dockerfile line 2: RUN has no flag --foo (its flags are --mount, --network, "
            "--security, --device)");
  EXPECT_EQ(parseError("FROM a\nRUN --network make\n"),
            "Dockerfile line 2: RUN --network needs a value (--network=...)");
  EXPECT_EQ(parseError("FROM a\nRUN\n"),
            "Dockerfile line 2: RUN needs a command: RUN <command> or RUN [\"executable\", "
            "\"arg\"]");
  EXPECT_EQ(parseError("FROM a\nRUN []\n"),
            "Dockerfile line 2: RUN needs a command: RUN <command> or RUN [\"executable\", "
            "\"arg\"]");
  EXPECT_EQ(parseError("FROM a\nRUN [\"echo\", 1]\n"),
            "Dockerfile line 2: a JSON array here must hold only strings: [\"executable\", "
            "\"arg\"] (or write the shell form without brackets)");
  EXPECT_EQ(parseError("FROM a\nCMD [[\"echo\"]]\n"),
            "Dockerfile line 2: a JSON array here must hold only strings: [\"executable\", "
            "\"arg\"] (or write the shell form without brackets)");
  EXPECT_EQ(parseError("FROM a\nENV --x=1 A=b\n"),
            "Dockerfile line 2: ENV takes no flags (remove --x)");
  // RUN -- ends the flags: what follows is the command.
  const Dockerfile df = parse("FROM a\nRUN --network=DEFAULT -- --help\n");
  EXPECT_EQ(payload<build::Run>(df.stages[0].instructions[0]).command.shell, "--help");
}

TEST(DockerfileErrorTest, CopyAndAdd) {
  EXPECT_EQ(parseError("FROM a\nCOPY only\n"),
            "Dockerfile line 2: COPY needs a source and a destination: COPY <src>... <dest>");
  EXPECT_EQ(parseError("FROM a\nADD []\n"),
            "Dockerfile line 2: ADD needs a source and a destination: ADD <src>... <dest>");
  EXPECT_EQ(parseError("FROM a\nCOPY x <<EOF\nbody\nEOF\n"),
            "Dockerfile line 2: COPY cannot take a heredoc as its destination: write COPY <<EOF "
            "<dest>");
  EXPECT_EQ(parseError("FROM a\nADD https://example.com/x.tgz /opt/\n", Errc::kUnsupported),
            "Dockerfile line 2: ADD https://example.com/x.tgz is not supported: hutch builds do "
            "not download URL or Git sources; download it in a RUN step (curl, wget or git "
            "clone)");
  EXPECT_EQ(parseError("FROM a\nADD git@github.com:moby/buildkit.git /src\n", Errc::kUnsupported),
            "Dockerfile line 2: ADD git@github.com:moby/buildkit.git is not supported: hutch "
            "builds do not download URL or Git sources; download it in a RUN step (curl, wget "
            "or git clone)");
  EXPECT_EQ(parseError("FROM a\nCOPY http://x/y /z\n"),
            "Dockerfile line 2: COPY cannot take a URL or Git source (http://x/y): download it in "
            "a RUN step");
  EXPECT_EQ(parseError("FROM a\nADD --checksum=sha256:00 x /y\n", Errc::kUnsupported),
            "Dockerfile line 2: ADD --checksum is not supported: it only applies to URL and Git "
            "sources, which hutch builds do not download (download them in a RUN step)");
  EXPECT_EQ(parseError("FROM a\nADD --keep-git-dir x /y\n", Errc::kUnsupported),
            "Dockerfile line 2: ADD --keep-git-dir is not supported: it only applies to URL and "
            "Git sources, which hutch builds do not download (download them in a RUN step)");
  EXPECT_EQ(parseError("FROM a\nCOPY --exclude=*.md . /app\n", Errc::kUnsupported),
            "Dockerfile line 2: COPY --exclude is not supported by hutch builds: leave the files "
            "out with .dockerignore or copy the wanted paths one by one");
  EXPECT_EQ(parseError("FROM a\nCOPY --parents a/./b /app\n", Errc::kUnsupported),
            "Dockerfile line 2: COPY --parents is not supported by hutch builds: copy each "
            "directory with its own COPY src/dir /dest/dir");
  EXPECT_EQ(parseError("FROM a\nADD --from=x a b\n"),
            "Dockerfile line 2: ADD has no flag --from (its flags are --chown, --chmod, --link, "
            "--keep-git-dir, --checksum, --unpack, --exclude)");
  EXPECT_EQ(parseError("FROM a\nCOPY --chown=a --chown=b x y\n"),
            "Dockerfile line 2: COPY --chown is given twice");
  EXPECT_EQ(parseError("FROM a\nCOPY --chown x y\n"),
            "Dockerfile line 2: COPY --chown needs a value (--chown=...)");
  EXPECT_EQ(parseError("FROM a\nCOPY --link=maybe x y\n"),
            "Dockerfile line 2: COPY --link takes true or false, not 'maybe'");
  EXPECT_EQ(parseError("FROM a\nCOPY --link= x y\n"),
            "Dockerfile line 2: COPY --link needs a value (true or false)");
  // Flags may be quoted.
  const Dockerfile df = parse("FROM a\nCOPY --chown=\"app user\":'grp' --link=FALSE x y\n");
  const Copy& copy = payload<Copy>(df.stages[0].instructions[0]);
  EXPECT_EQ(copy.chown, "app user:grp");
  EXPECT_FALSE(copy.link);
}

TEST(DockerfileErrorTest, CopyFrom) {
  EXPECT_EQ(parseError("FROM a AS base\nCOPY --from=$STAGE /x /y\n"),
            "Dockerfile line 2: COPY --from=$STAGE uses variables or quotes, which --from does "
            "not expand: name a stage (FROM ${IMAGE} AS base, with a global ARG IMAGE) and copy "
            "from it");
  EXPECT_EQ(parseError("FROM a\nCOPY --from=1 /x /y\n"),
            "Dockerfile line 2: COPY --from=1 names stage 1, but this is stage 0: copy only from "
            "earlier stages");
  EXPECT_EQ(parseError("FROM a AS one\nCOPY --from=0 /x /y\n"),
            "Dockerfile line 2: COPY --from=0 names stage 0, but this is stage 0: copy only from "
            "earlier stages");
  EXPECT_EQ(parseError("FROM a AS one\nCOPY --from=two /x /y\nFROM b AS two\n"),
            "Dockerfile line 2: COPY --from=two names stage 1 ('two'), which is this stage or a "
            "later one: stages can copy only from earlier stages, so move it above");
  EXPECT_EQ(parseError("FROM a AS one\nCOPY --from=one /x /y\n"),
            "Dockerfile line 2: COPY --from=one names stage 0 ('one'), which is this stage or a "
            "later one: stages can copy only from earlier stages, so move it above");
  const std::string bad = parseError("FROM a\nCOPY --from=Not_An_Image! /x /y\n");
  EXPECT_TRUE(
      bad.starts_with("Dockerfile line 2: COPY --from=Not_An_Image! is neither an "
                      "earlier stage nor an image: 'Not_An_Image!' is not a valid image "
                      "reference"))
      << bad;
  EXPECT_EQ(parseError("FROM a\nCOPY --from= /x /y\n"),
            "Dockerfile line 2: COPY --from needs a stage name, index or image");
}

TEST(DockerfileErrorTest, Arguments) {
  const std::map<std::string, std::string> cases = {
      {"ENV FOO", "ENV FOO has no value: write ENV FOO=value"},
      {"ENV", "ENV needs an argument: ENV NAME=value ..."},
      {"ENV =x", "ENV names cannot be blank: '=x'"},
      {"ENV a=b c", "ENV takes NAME=value pairs, and 'c' has no '='"},
      {"LABEL", "LABEL needs an argument: LABEL NAME=value ..."},
      {"LABEL a=1 b", "LABEL takes NAME=value pairs, and 'b' has no '='"},
      {"ARG", "ARG needs an argument: ARG NAME[=default] ..."},
      {"ARG =x", "ARG names cannot be blank: write ARG NAME=value"},
      {"WORKDIR", "WORKDIR needs an argument: WORKDIR /path"},
      {"USER", "USER needs an argument: USER name[:group] or USER uid[:gid]"},
      {"STOPSIGNAL", "STOPSIGNAL needs an argument: STOPSIGNAL SIGTERM"},
      {"MAINTAINER", "MAINTAINER needs an argument: MAINTAINER name <email>"},
      {"VOLUME", "VOLUME needs a path: VOLUME /data"},
      {"VOLUME [\"\"]", "VOLUME paths cannot be empty strings"},
      {"VOLUME [\" \"]", "VOLUME paths cannot be empty strings"},
      {"EXPOSE", "EXPOSE needs a port: EXPOSE 8000 8443/tcp 53/udp"},
      {"EXPOSE http",
       "'http' is not a port to EXPOSE: a port is a number from 0 to 65535; write 8000, "
       "8000/udp or 8000-8010/tcp"},
      {"EXPOSE 80/xyz",
       "'80/xyz' is not a port to EXPOSE: the protocol must be tcp, udp or sctp; write 8000, "
       "8000/udp or 8000-8010/tcp"},
      {"EXPOSE '80", "Cannot expand ''80': a single quote (') is not closed"},
      {"SHELL", "SHELL needs a command: SHELL [\"/bin/bash\", \"-c\"]"},
      {"SHELL []", "SHELL needs a command: SHELL [\"/bin/bash\", \"-c\"]"},
      {"SHELL /bin/bash -c",
       "SHELL takes a JSON array: SHELL [\"/bin/bash\", \"-c\"], not 'SHELL /bin/bash -c'"},
      {"CMD",
       "CMD needs a command: CMD <command> or CMD [\"executable\", \"arg\"] (CMD [] clears it)"},
      {"ENTRYPOINT",
       "ENTRYPOINT needs a command: ENTRYPOINT <command> or ENTRYPOINT [\"executable\", "
       "\"arg\"] (ENTRYPOINT [] clears it)"},
      {"HEALTHCHECK", "HEALTHCHECK needs an argument: HEALTHCHECK [options] CMD <command>"},
      {"HEALTHCHECK NONE x", "HEALTHCHECK NONE takes no arguments"},
      {"HEALTHCHECK PING x", "HEALTHCHECK takes CMD <command> or NONE, not 'PING'"},
      {"HEALTHCHECK CMD", "HEALTHCHECK CMD needs a command"},
      {"HEALTHCHECK CMD []", "HEALTHCHECK CMD needs a command"},
      {"HEALTHCHECK --interval=soon CMD true",
       "HEALTHCHECK --interval=soon is not a duration (write it like 30s, 1m30s or 500ms)"},
      {"HEALTHCHECK --timeout=1us CMD true", "HEALTHCHECK --timeout=1us is shorter than 1ms"},
      {"HEALTHCHECK --timeout=-5s CMD true", "HEALTHCHECK --timeout=-5s is shorter than 1ms"},
      {"HEALTHCHECK --retries=-1 CMD true",
       "HEALTHCHECK --retries=-1 is not a number of retries (0 or more)"},
      {"HEALTHCHECK --retries=99999999999 CMD true",
       "HEALTHCHECK --retries=99999999999 is not a number of retries (0 or more)"},
      {"HEALTHCHECK --every=5s CMD true",
       "HEALTHCHECK has no flag --every (its flags are --interval, --timeout, --start-period, "
       "--start-interval, --retries)"},
  };
  for (const auto& [line, message] : cases) {
    EXPECT_EQ(parseError("FROM a\n" + line + "\n"), "Dockerfile line 2: " + message) << line;
  }
}

TEST(DockerfileTest, HealthcheckForms) {
  const Dockerfile df = parse(
      "FROM a\n"
      "HEALTHCHECK NONE\n"
      "HEALTHCHECK --interval=1.5m --start-interval=500ms CMD [\"curl\", \"-f\", \"http://x\"]\n"
      "healthcheck cmd true\n");
  const auto& ins = df.stages[0].instructions;
  EXPECT_EQ(payload<Healthcheck>(ins[0]).test, (std::vector<std::string>{"NONE"}));
  const Healthcheck& exec = payload<Healthcheck>(ins[1]);
  EXPECT_EQ(exec.test, (std::vector<std::string>{"CMD", "curl", "-f", "http://x"}));
  EXPECT_EQ(exec.interval_ns, 90'000'000'000);
  EXPECT_EQ(exec.start_interval_ns, 500'000'000);
  EXPECT_EQ(payload<Healthcheck>(ins[2]).test, (std::vector<std::string>{"CMD-SHELL", "true"}));
}

TEST(DockerfileErrorTest, Heredocs) {
  EXPECT_EQ(parseError("FROM a\nRUN <<EOF\necho hi\n"),
            "Dockerfile line 2: the heredoc <<EOF is not terminated: end it with a line holding "
            "only EOF");
  EXPECT_EQ(parseError("FROM a\nRUN <<EOF\necho hi\n EOF\n"),
            "Dockerfile line 2: the heredoc <<EOF is not terminated: end it with a line holding "
            "only EOF");
  EXPECT_EQ(parseError("FROM a\nRUN cat <<A <<B\nx\nA\n"),
            "Dockerfile line 2: the heredoc <<B is not terminated: end it with a line holding "
            "only B");
  // A marker BuildKit cannot read is an ordinary word, as there.
  const Dockerfile df = parse("FROM a\nCOPY <<\"EOF /x\nRUN cat <<\"EOF\n");
  EXPECT_EQ(payload<Copy>(df.stages[0].instructions[0]).sources,
            (std::vector<std::string>{"<<\"EOF"}));
  EXPECT_TRUE(payload<build::Run>(df.stages[0].instructions[1]).heredocs.empty());
}

TEST(DockerfileErrorTest, Limits) {
  EXPECT_EQ(parseError(std::string(kMaxDockerfileBytes + 1, '#')),
            "The Dockerfile is 1048577 bytes, more than the 1048576 a build accepts");
  EXPECT_EQ(parseError("FROM a\nRUN " + std::string(kMaxLineBytes, 'x') + "\n"),
            "Dockerfile line 2: the line is longer than 65536 bytes (Docker's limit too): split "
            "it with line continuations");
  std::string many = "FROM a\n";
  for (size_t i = 0; i < kMaxInstructions; ++i) many += "RUN x\n";
  EXPECT_EQ(parseError(many),
            "Dockerfile line 10001: the Dockerfile has more than 10000 instructions; split the "
            "build into several images");
  // Exactly at the limits is fine.
  std::string enough = "FROM a\n";
  for (size_t i = 1; i < kMaxInstructions; ++i) enough += "RUN x\n";
  EXPECT_EQ(parse(enough).stages[0].instructions.size(), kMaxInstructions - 1);
}

TEST(DockerfileTest, HostileInputsEndQuickly) {
  // Wide port ranges are checked, not listed; many stages are checked for names in one pass.
  std::string ports = "FROM a\n";
  for (int i = 0; i < 9000; ++i) ports += "EXPOSE 0-65535/udp 1-65535\n";
  EXPECT_TRUE(parseDockerfile(ports));
  std::string stages;
  for (int i = 0; i < 9000; ++i) stages += "FROM a AS s" + std::to_string(i) + "\n";
  EXPECT_TRUE(parseDockerfile(stages));
  // Long continuations, many heredocs and deep JSON must neither crash nor take long.
  std::string text = "FROM a\nRUN x";
  for (int i = 0; i < 20000; ++i) text += " \\\n y";
  text += "\n";
  EXPECT_TRUE(parseDockerfile(text));
  std::string json = "FROM a\nRUN " + std::string(60000, '[') + "\n";
  auto deep = parseDockerfile(json);
  ASSERT_TRUE(deep);
  EXPECT_FALSE(payload<build::Run>(deep->stages[0].instructions[0]).command.json_form);
  std::string nested = "FROM a\nCMD [" + std::string(30000, '[') + std::string(30000, ']') + "]\n";
  EXPECT_FALSE(parseDockerfile(nested));
  std::string heredocs = "FROM a\nRUN";
  for (int i = 0; i < 5000; ++i) heredocs += " <<E" + std::to_string(i);
  heredocs += "\n";
  for (int i = 0; i < 5000; ++i) heredocs += "E" + std::to_string(i) + "\n";
  auto many = parseDockerfile(heredocs);
  ASSERT_TRUE(many) << many.error().message();
  EXPECT_EQ(payload<build::Run>(many->stages[0].instructions[0]).heredocs.size(), 5000u);
  EXPECT_FALSE(parseDockerfile(std::string("FROM a\n\0\0\0RUN \xff\xfe\n", 17)));
}

}  // namespace
}  // namespace hutch::build

#include "api/exec_model.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hutch::api {
namespace {

using nlohmann::json;

TEST(ExecModelTest, RunRequestWithEverything) {
  auto run = parseExecRun(
      R"({"argv":["sh","-c","cat"],"env":{"A":"1"},"cwd":"/tmp","user":"root","stdin":"hi",
          "timeout_ms":500,"max_output_bytes":10})");
  ASSERT_TRUE(run) << run.error().message();
  EXPECT_EQ(run->exec.argv, (std::vector<std::string>{"sh", "-c", "cat"}));
  EXPECT_EQ(run->exec.env, (std::vector<std::string>{"A=1"}));
  EXPECT_EQ(run->exec.cwd, "/tmp");
  EXPECT_EQ(run->exec.user, "root");
  EXPECT_TRUE(run->exec.pipe_stdin);
  EXPECT_EQ(*run->stdin_data, "hi");
  EXPECT_EQ(run->timeout_ms, 500u);
  EXPECT_EQ(run->max_output_bytes, 10u);
}

TEST(ExecModelTest, RunRequestDefaultsAndEnvArrays) {
  auto run = parseExecRun(R"({"argv":["true"],"env":["X=y"]})");
  ASSERT_TRUE(run);
  EXPECT_FALSE(run->exec.pipe_stdin);
  EXPECT_FALSE(run->stdin_data);
  EXPECT_EQ(run->timeout_ms, 0u);
  EXPECT_EQ(run->max_output_bytes, kDefaultMaxOutput);
  EXPECT_EQ(run->exec.env, (std::vector<std::string>{"X=y"}));
  auto b64 = parseExecRun(R"({"argv":["cat"],"stdin_base64":"AP8="})");
  ASSERT_TRUE(b64);
  EXPECT_EQ(*b64->stdin_data, std::string("\x00\xff", 2));
}

TEST(ExecModelTest, RunRequestRefusesBadInputNamingTheField) {
  struct Case {
    const char* body;
    const char* says;
  } cases[] = {
      {R"({})", "argv"},
      {R"({"argv":[]})", "argv"},
      {R"({"argv":"ls"})", "argv"},
      {R"({"argv":[1]})", "argv"},
      {R"({"argv":["ls"],"bogus":1})", "bogus"},
      {R"({"argv":["ls"],"env":{"A":1}})", "env"},
      {R"({"argv":["ls"],"env":["NOEQUALS"]})", "KEY=VALUE"},
      {R"({"argv":["ls"],"cwd":"relative"})", "absolute"},
      {R"({"argv":["ls"],"stdin":"a","stdin_base64":"YQ=="})", "not both"},
      {R"({"argv":["ls"],"stdin_base64":"!!"})", "base64"},
      {R"({"argv":["ls"],"timeout_ms":-1})", "timeout_ms"},
      {R"({"argv":["ls"],"timeout_ms":"5"})", "timeout_ms"},
      {R"({"argv":["ls"],"max_output_bytes":0})", "max_output_bytes"},
      {R"({"argv":["ls"],"max_output_bytes":999999999999})", "max_output_bytes"},
      {R"(not json)", "JSON"},
      {R"([1])", "object"},
  };
  for (const Case& c : cases) {
    auto run = parseExecRun(c.body);
    ASSERT_FALSE(run) << c.body;
    EXPECT_EQ(run.error().code(), Errc::kInvalidArgument) << c.body;
    EXPECT_NE(run.error().message().find(c.says), std::string::npos)
        << c.body << ": " << run.error().message();
  }
}

TEST(ExecModelTest, StartMessageForTerminals) {
  auto start =
      parseExecStart(R"({"login_shell":true,"tty":true,"rows":24,"cols":80,"stdin":true})");
  ASSERT_TRUE(start) << start.error().message();
  EXPECT_TRUE(start->exec.tty);
  EXPECT_TRUE(start->exec.login_shell);
  EXPECT_TRUE(start->exec.pipe_stdin);
  EXPECT_EQ(start->exec.rows, 24);
  EXPECT_EQ(start->exec.cols, 80);
  EXPECT_EQ(start->timeout_ms, 0u);
  EXPECT_EQ(parseExecStart(R"({"argv":["ls"],"timeout_ms":1500})")->timeout_ms, 1500u);
  EXPECT_FALSE(parseExecStart(R"({"argv":["ls"],"timeout_ms":-1})"));
  EXPECT_FALSE(parseExecStart(R"({"argv":["ls"],"detach":true})"));
  EXPECT_FALSE(parseExecStart(R"({"argv":["ls"],"rows":-1})"));
  EXPECT_FALSE(parseExecStart(R"({"login_shell":true,"argv":["ls"]})"));
}

TEST(ExecModelTest, UpgradeAndProcessRequestsAreStrictAboutFields) {
  auto ok = parseExecRequest(R"({"argv":["ls","-l"],"env":["A=1"],"cwd":"/tmp","detach":true})",
                             "a process request");
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(ok->exec.argv, (std::vector<std::string>{"ls", "-l"}));
  EXPECT_TRUE(ok->exec.detach);
  auto timed = parseExecRequest(R"({"argv":["sleep","9"],"timeout_ms":250})", "the exec request");
  ASSERT_TRUE(timed) << timed.error().message();
  EXPECT_EQ(timed->timeout_ms, 250u);
  EXPECT_EQ(timed->exec.argv, (std::vector<std::string>{"sleep", "9"}));
  EXPECT_FALSE(parseExecRequest(R"({"argv":["ls"],"detach":true,"timeout_ms":5})", "x"));
  auto unknown = parseExecRequest(R"({"argv":["ls"],"no_such_field":1})", "a process request");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(unknown.error().message().find("'no_such_field' in a process request"),
            std::string::npos)
      << unknown.error().message();
  auto bad = parseExecRequest(R"({"argv":"ls"})", "the exec request");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("Bad request (the exec request)"), std::string::npos)
      << bad.error().message();
  EXPECT_FALSE(parseExecRequest("[1]", "the exec request"));
}

TEST(ExecModelTest, OutcomeSendsTextAsItIsAndBytesAsBase64) {
  ExecOutcome o;
  o.stdout_data = "hi\n";
  o.stderr_data = std::string("\xff\x00", 2);
  o.status = proto::ExitStatus::exited(3);
  o.duration_ms = 7;
  json j = toJson(o);
  EXPECT_EQ(j["stdout"], "hi\n");
  EXPECT_EQ(j["stdout_encoding"], "utf-8");
  EXPECT_EQ(j["stderr"], "/wA=");
  EXPECT_EQ(j["stderr_encoding"], "base64");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_TRUE(j["signal"].is_null());
  EXPECT_TRUE(j["error"].is_null());
  o.status = proto::ExitStatus::signaled(9);
  o.error = Error(Errc::kNotFound, "No such command");
  j = toJson(o);
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["signal"], 9);
  EXPECT_EQ(j["error"]["code"], "not_found");
}

}  // namespace
}  // namespace hutch::api

namespace hutch::api {
namespace {

TEST(WsControlTest, ReadsTheThreeControlMessages) {
  EXPECT_EQ(parseWsControl(R"({"type":"stdin_eof"})"),
            WsControl{.kind = WsControl::Kind::kStdinEof});
  EXPECT_EQ(parseWsControl(R"({"type":"resize","rows":40,"cols":120})"),
            (WsControl{.kind = WsControl::Kind::kResize, .rows = 40, .cols = 120}));
  EXPECT_EQ(parseWsControl(R"({"type":"resize","rows":99999,"cols":18446744073709551615})"),
            (WsControl{.kind = WsControl::Kind::kResize, .rows = 10000, .cols = 10000}));
  EXPECT_EQ(parseWsControl(R"({"type":"signal","signal":15})"),
            (WsControl{.kind = WsControl::Kind::kSignal, .signal = 15}));
}

TEST(WsControlTest, IgnoresWhatIsNotAControlMessage) {
  for (const char* message :
       {"", "not json", "[]", "{}", R"({"type":1})", R"({"type":"exec"})",
        R"({"type":"resize","rows":-1,"cols":2})", R"({"type":"resize","rows":1})",
        R"({"type":"signal"})", R"({"type":"signal","signal":"TERM"})",
        R"({"type":"signal","signal":0})", R"({"type":"signal","signal":65})",
        R"({"type":"signal","signal":-9})",
        // Not wrapped into a small signal number (2^32 + 1 is not SIGHUP).
        R"({"type":"signal","signal":4294967297})",
        R"({"type":"signal","signal":18446744073709551615})"}) {
    EXPECT_EQ(parseWsControl(message), std::nullopt) << message;
  }
}

}  // namespace
}  // namespace hutch::api
